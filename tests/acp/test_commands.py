"""ACP advertises the slash commands with one ``available_commands_update`` queued to follow the answer of
``session/new``, ``load``, ``resume`` and ``fork`` (never sent before it), in the schema's shape."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import SessionNotification

from acp_server.bridge import COMMANDS, SessionNotFoundError

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
