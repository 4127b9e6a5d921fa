"""The ACP face of one owner per live session: two real stdio agents on one PostgreSQL database; ``session/load`` in
the second of a session the first holds is -32603 ``session_busy`` naming the first's instance (its pid inside);
``session/close`` in the first lets the second load it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e


class Agent:
    """``acp-server --store URL`` over pipes, one request at a time (the answer skips notifications)."""

    def __init__(self, dsn: str, state: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
        env.update(XDG_STATE_HOME=str(state))
        command = [sys.executable, "-m", "acp_server", "--offline", "--store", dsn, "--log-level", "WARNING"]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self._id = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self._id += 1
        line = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(line).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            raw = self.process.stdout.readline()
            assert raw, "the agent closed its stdout"
            message: dict[str, Any] = json.loads(raw)
            if message.get("id") == self._id and "method" not in message:
                return message

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            self.process.kill()
            self.process.wait()
            self.process.stdout.close()


def test_session_load_of_a_held_session_is_busy_with_the_holder_until_it_closes(pg_dsn: str, tmp_path: Path) -> None:
    first, second = Agent(pg_dsn, tmp_path / "a"), Agent(pg_dsn, tmp_path / "b")
    try:
        for agent in (first, second):
            assert "result" in agent.call("initialize", {"protocolVersion": 1})
        created = first.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        session_id = created["result"]["sessionId"]
        load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        busy = second.call("session/load", load)
        error = busy["error"]
        assert error["code"] == -32603
        data = error["data"]
        assert (data["errorKind"], data["sessionId"], data["retryable"]) == ("session_busy", session_id, True)
        assert f"-{first.process.pid}-" in data["instance"]
        assert "result" in first.call("session/close", {"sessionId": session_id})
        assert "result" in second.call("session/load", load)
        reloaded = first.call("session/load", load)
        assert reloaded.get("error", {}).get("data", {}).get("errorKind") == "session_busy", reloaded
        again = first.call("session/resume", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []})
        assert again["error"]["data"]["errorKind"] == "session_busy"
        assert f"-{second.process.pid}-" in again["error"]["data"]["instance"]
    finally:
        first.close()
        second.close()
