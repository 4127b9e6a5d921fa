"""The model runner's clients: one replaced by a change of endpoint stays open for the turns still on it, at most
RETIRED_KEPT of them (the oldest closed first); every one is closed with the runner."""

from __future__ import annotations

import pytest

from acp_server.provider import make_openai_client
from acp_server.turn._clients import RETIRED_KEPT, ClientSlot

pytestmark = pytest.mark.anyio


async def test_replaced_clients_stay_open_bounded_and_all_close_at_the_end() -> None:
    slot = ClientSlot()
    made = []
    for _ in range(RETIRED_KEPT + 2):
        slot.current = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None, headers={"X-A": "1"})
        made.append(slot.current)
        await slot.retire()
        assert slot.current is None
    assert [c.is_closed() for c in made] == [True, True] + [False] * RETIRED_KEPT
    slot.current = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None)
    made.append(slot.current)
    await slot.aclose()
    assert all(c.is_closed() for c in made) and slot.current is None
    await slot.aclose()  # idempotent


def test_headers_go_with_every_request_over_the_sdks_own() -> None:
    client = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None, headers={"Authorization": "Bearer t"})
    assert client.default_headers["Authorization"] == "Bearer t"
