"""ACP advertises the slash commands with one ``available_commands_update`` queued to follow the answer of
``session/new``, ``load``, ``resume`` and ``fork`` (never sent before it), in the schema's shape; a session's changed
prompt list (its MCP servers') is announced again to the connections it is attached to."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import SessionNotification

from acp_server.acp import AcpAgent, AgentOptions, bind
from acp_server.acp._commands import after_queued
from acp_server.bridge import SessionNotFoundError
from acp_server.commands import COMMANDS
from tests.mcp.test_servers import SERVER as PY_SERVER
from tests.mcp.test_servers import call, eventually

from ._support import FakePeer, bound

pytestmark = pytest.mark.anyio


def _commands_update(peer: FakePeer, session_id: str) -> dict[str, Any]:
    """The one update queued after the answer; nothing about commands was sent before it."""
    assert all(p["update"]["sessionUpdate"] != "available_commands_update" for _, p in peer.notifications)
    [(method, params)] = peer.after_replies
    assert method == "session/update"
    SessionNotification.model_validate(params)  # the schema's shape
    assert params["sessionId"] == session_id
    return dict(params["update"])


async def test_every_answer_that_makes_a_session_known_is_followed_by_its_commands() -> None:
    async with bound() as b:
        peer = b.peer()
        reply = await b.requests["session/new"]({"cwd": "/tmp", "mcpServers": []}, peer)
        sid = reply["sessionId"]
        update = _commands_update(peer, sid)
        assert update["sessionUpdate"] == "available_commands_update"
        names = [command["name"] for command in update["availableCommands"]]
        assert names == [command.name for command in COMMANDS]
        by_name = {command["name"]: command for command in update["availableCommands"]}
        assert by_name["mode"]["input"]["hint"] and by_name["model"]["input"]["hint"]
        assert "input" not in by_name["help"]
        assert all(command["description"] for command in update["availableCommands"])

        for method, params in (
            ("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}),
            ("session/resume", {"sessionId": sid, "cwd": "/tmp"}),
        ):
            peer = b.peer(2)
            await b.requests[method](params, peer)
            assert _commands_update(peer, sid)["sessionUpdate"] == "available_commands_update"

        peer = b.peer(3)
        forked = await b.requests["session/fork"]({"sessionId": sid, "cwd": "/tmp"}, peer)
        assert _commands_update(peer, forked["sessionId"])["availableCommands"] == update["availableCommands"]


async def test_a_refused_session_request_queues_no_commands() -> None:
    async with bound() as b:
        peer = b.peer()
        with pytest.raises(SessionNotFoundError):
            await b.requests["session/resume"]({"sessionId": "nope", "cwd": "/tmp"}, peer)
        assert peer.after_replies == []


async def test_a_changed_prompt_list_is_announced_to_the_connections_the_session_is_attached_to(tmp_path: Path) -> None:
    async with bound() as b:
        told: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        agent = AcpAgent(b.bridge, AgentOptions(), lambda _sid, _method, params: told.append(dict(params)))
        AcpAgent(b.bridge, AgentOptions(), lambda _sid, _method, params: others.append(dict(params)))
        new = bind(agent)[0]["session/new"]
        server = {"name": "py", "command": sys.executable, "args": [PY_SERVER], "env": []}
        with anyio.fail_after(40):
            reply = await new({"cwd": str(tmp_path), "mcpServers": [server]}, FakePeer(1, b.bridge))
        sid = reply["sessionId"]
        entry = b.bridge.get(sid)
        b.bridge._sessions.commands_changed(entry)  # nothing differs: nothing is told
        queued = anyio.Event()
        after_queued(queued.set)  # runs after an announce queued by that change, if any
        await queued.wait()
        assert told == []
        await call(entry.tools, "mcp__py__add_prompt")
        await eventually(lambda: bool(told))
        [params] = told
        SessionNotification.model_validate(params)
        assert params["sessionId"] == sid
        assert "mcp__py__late" in {c["name"] for c in params["update"]["availableCommands"]}
        assert others == []  # a connection the session is not attached to hears nothing
