"""The bounded log handler: ``emit`` never waits for the sink; what it had to drop is counted and reported once."""

from __future__ import annotations

import logging
import threading

import pytest

import acp_server.cli._logging as logging_module
from acp_server.cli._logging import BoundedLogHandler


def _record(n: int) -> logging.LogRecord:
    return logging.LogRecord("acp_server", logging.INFO, __file__, 1, "record %d", (n,), None)


def test_a_blocked_sink_drops_and_counts_then_reports_once_drained() -> None:
    release = threading.Event()
    entered = threading.Event()
    written: list[bytes] = []

    def write(data: bytes) -> None:
        entered.set()
        assert release.wait(30)  # the sink is stuck until the test lets it go
        written.append(data)

    handler = BoundedLogHandler(write, capacity=10)
    handler.emit(_record(0))
    assert entered.wait(30)  # the writer holds record 0 and is blocked in the sink
    for n in range(1, 101):  # 10 fit in the queue, 90 cannot: none of these calls may wait
        handler.emit(_record(n))
    assert handler.dropped == 90
    release.set()
    handler.close()
    lines = b"".join(written).decode().splitlines()
    assert lines[:11] == [f"record {n}" for n in range(11)]
    assert lines[11:] == ["acp-server: 90 log record(s) dropped: the log output could not keep up"]


def test_nothing_dropped_means_no_report() -> None:
    written: list[bytes] = []
    handler = BoundedLogHandler(written.append, capacity=10)
    for n in range(5):
        handler.emit(_record(n))
    handler.close()
    assert b"".join(written).decode().splitlines() == [f"record {n}" for n in range(5)]
    assert handler.dropped == 0


def test_close_gives_up_on_a_sink_that_never_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging_module, "_CLOSE_TIMEOUT_S", 0.01)  # the writer never returns: any bound is waited out
    stuck = threading.Event()

    def write(data: bytes) -> None:
        stuck.wait()  # never set: a pipe nobody reads

    handler = BoundedLogHandler(write, capacity=2)
    for n in range(10):
        handler.emit(_record(n))
    handler.close()  # bounded: returns although the writer is still blocked
    stuck.set()
