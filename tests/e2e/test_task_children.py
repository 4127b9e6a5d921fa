"""Subagent children stored, through real agent processes on a real SQLite state directory: a ``task`` call's child
is a session of its own in the store, linked to its parent; after a restart ``session/list`` does not show it, the
parent lists it (``_meta.acpServer.parentId``), a load of it is refused precisely, and deleting the parent
deletes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.store import SqliteSessionStore

from .test_sessions_durable import _prompt, spawn

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _children_request(parent: str) -> dict[str, Any]:
    return {"_meta": {"acpServer": {"parentId": parent}}}


async def test_a_child_is_stored_under_its_parent_listed_only_there_and_deleted_with_it(tmp_path: Path) -> None:
    (tmp_path / "VERSION").write_text("4.2.0\n")
    state = tmp_path / "state-dir"
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("task", {"description": "Find the version", "prompt": "Read VERSION"}),)),
            ToolCalls((ScriptedCall("read_file", {"path": "VERSION"}),)),  # the child's first request
            Answer(text="The version is 4.2.0."),  # the child's answer
            Answer(text="It is 4.2.0."),  # the parent's
        )
        args = ("--state-dir", str(state), "--base-url", model.base_url, "--model", "m")
        async with spawn(*args, home=tmp_path) as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}})
            parent = await agent.new_session(str(tmp_path))
            msg_id = await agent.request_nowait("session/prompt", _prompt(parent, "which version?"))
            reply, seen = await agent.until_response(msg_id, timeout=60)
            assert reply["result"]["stopReason"] == "end_turn", reply
            [child] = [
                m["params"]["update"]["sessionId"]
                for m in seen
                if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "subagent_update"
            ]

        async with SqliteSessionStore(state / "sessions.db") as store:  # the process is gone: the file as it left it
            snapshot = await store.read_session(child)
            assert snapshot is not None and snapshot.record.task_of == parent
            assert snapshot.record.title == "Find the version" and snapshot.record.mode == "read-only"
            assert [(m.role, m.content, m.outcome) for m in snapshot.messages] == [
                ("user", "Read VERSION", "complete"),
                ("assistant", "The version is 4.2.0.", "complete"),
            ]
            assert [step.calls[0].name for step in snapshot.messages[1].steps] == ["read_file"]

        async with spawn(*args, home=tmp_path) as again:
            await again.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}})
            listed = (await again.request("session/list", {}))["result"]["sessions"]
            assert [s["sessionId"] for s in listed] == [parent]
            [info] = (await again.request("session/list", _children_request(parent)))["result"]["sessions"]
            assert info["sessionId"] == child and info["_meta"]["acpServer"]["parentId"] == parent
            assert info["title"] == "Find the version"
            load = {"sessionId": child, "cwd": str(tmp_path), "mcpServers": []}
            for method in ("session/load", "session/resume"):
                error = (await again.request(method, load))["error"]
                assert error["code"] == -32602 and "subagent" in error["message"], (method, error)
            error = (await again.request("session/prompt", _prompt(child, "hi")))["error"]
            assert error["data"]["errorKind"] == "session_not_found"  # never attached: nothing to prompt
            bad = (await again.request("session/list", {"_meta": {"acpServer": {"parentId": 7}}}))["error"]
            assert bad["code"] == -32602 and "parentId" in bad["message"]

            assert (await again.request("session/delete", {"sessionId": parent}))["result"] == {}
            assert (await again.request("session/list", _children_request(parent)))["result"]["sessions"] == []

        async with SqliteSessionStore(state / "sessions.db") as store:
            assert await store.get_session(child) is None and await store.get_session(parent) is None
