"""Property test over real pipes: random JSON values and byte strings never crash the server, and every request
with a usable id is answered exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from queue import Empty, Queue
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

METHODS = ["initialize", "session/new", "session/prompt", "session/cancel", "session/fork", "$/cancel_request", "x"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ids = st.integers(min_value=-(2**40), max_value=2**40) | st.text(max_size=10)
envelopes = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.sampled_from(METHODS) | st.text(max_size=12)},
    optional={"id": ids | json_values, "params": json_values},
)


class _Server:
    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "--log-level", "WARNING", "--no-persist"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: Queue[bytes] = Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.ping_id = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def roundtrip(self, data: bytes) -> list[dict[str, Any]]:
        """Send ``data`` then a ping; return every message received up to and including the ping's reply."""
        self.ping_id += 1
        ping = f"ping-{self.ping_id}"
        self.send(data)
        self.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": ping, "method": "initialize", "params": {"protocolVersion": 1}}
            ).encode()
        )
        seen: list[dict[str, Any]] = []
        while True:
            try:
                raw = self.lines.get(timeout=10)
            except Empty:
                raise AssertionError(f"no reply to ping after {data[:200]!r}") from None
            message = json.loads(raw)
            assert message.get("jsonrpc") == "2.0"
            seen.append(message)
            if message.get("id") == ping:
                return seen


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    running = _Server()
    yield running
    assert running.process.stdin is not None
    running.process.stdin.close()
    assert running.process.wait(timeout=10) == 0
    running.reader.join(timeout=10)
    assert running.process.stdout is not None
    running.process.stdout.close()


def _expects_reply(value: Any) -> bool:
    if not isinstance(value, dict) or "id" not in value:
        return False
    msg_id = value["id"]
    return (isinstance(msg_id, int) and not isinstance(msg_id, bool)) or isinstance(msg_id, str)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values | envelopes)
def test_random_json_values(server: _Server, value: Any) -> None:
    seen = server.roundtrip(json.dumps(value).encode())
    if _expects_reply(value) and value.get("method") != "session/prompt":
        replies = [m for m in seen if "method" not in m and m.get("id") == value["id"]]
        assert len(replies) == 1, (value, seen)
        assert ("result" in replies[0]) != ("error" in replies[0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")))
def test_random_bytes(server: _Server, data: bytes) -> None:
    server.roundtrip(data)
    assert server.process.poll() is None
