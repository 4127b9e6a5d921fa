"""The client's three timeouts come from its one ``timeout`` setting: requests as given, event streams reading for
at least ``EVENTS_READ_TIMEOUT_S`` (a heartbeat-spaced stream must not time out), blocking prompts without a read
timeout; connect, write and pool limits are kept in all three."""

from __future__ import annotations

import httpx2

from acp_server.client import DEFAULT_TIMEOUT, EVENTS_READ_TIMEOUT_S
from acp_server.client._options import Timeouts


def test_the_default_gives_events_the_heartbeat_floor_and_a_blocking_prompt_no_read_limit() -> None:
    timeouts = Timeouts.of(DEFAULT_TIMEOUT)
    assert timeouts.request == DEFAULT_TIMEOUT
    assert timeouts.events.read == EVENTS_READ_TIMEOUT_S
    assert timeouts.wait.read is None
    for derived in (timeouts.events, timeouts.wait):
        assert (derived.connect, derived.write, derived.pool) == (5.0, 30.0, 30.0)


def test_a_longer_read_timeout_is_kept_for_events() -> None:
    timeouts = Timeouts.of(httpx2.Timeout(120.0, connect=2.0))
    assert timeouts.events.read == 120.0
    assert timeouts.events.connect == 2.0


def test_a_number_is_every_limit_and_none_disables_them() -> None:
    assert Timeouts.of(3.0).request == httpx2.Timeout(3.0)
    assert Timeouts.of(3.0).events.read == EVENTS_READ_TIMEOUT_S
    assert Timeouts.of(None).events.read is None
    assert Timeouts.of(None).wait == httpx2.Timeout(None)
