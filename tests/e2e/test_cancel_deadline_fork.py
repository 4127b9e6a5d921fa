"""Cancel scopes, deadlines and fork over real pipes (issue: session bridge, items 4-6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def _prompt(session_id: str, text: str, meta: dict[str, object] | None = None) -> dict[str, object]:
    params: dict[str, object] = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    if meta is not None:
        params["_meta"] = meta
    return params


async def test_cancel_request_removes_a_waiting_prompt_and_frees_its_slot() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.05, text="running " * 40), Answer(text="third", reasoning=""))
        args = ["--base-url", model.base_url, "--model", "m", "--max-pending-prompts-per-session", "2"]
        async with spawn_agent(*args) as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            running = await agent.request_nowait("session/prompt", _prompt(session_id, "first"))
            await model.wait_for_requests(1)
            waiting = await agent.request_nowait("session/prompt", _prompt(session_id, "second"))
            refused = await agent.request("session/prompt", _prompt(session_id, "refused"))
            assert refused["error"]["data"]["pendingCount"] == 2

            await agent.notify("$/cancel_request", {"requestId": waiting})
            response, _ = await agent.until_response(waiting)
            assert response["result"] == {"stopReason": "cancelled"}

            third = await agent.request_nowait("session/prompt", _prompt(session_id, "third"))  # the slot came back
            await agent.notify("session/cancel", {"sessionId": session_id})  # stops the session: running and queued
            answers: dict[Any, dict[str, Any]] = {}
            with anyio.fail_after(20):  # in either order (the queued one is withdrawn first)
                while len(answers) < 2:
                    message = await agent.receive()
                    if "method" not in message and message.get("id") in (running, third):
                        answers[message["id"]] = message
            assert answers[running]["result"] == answers[third]["result"] == {"stopReason": "cancelled"}
            last = await agent.request("session/prompt", _prompt(session_id, "fourth"))  # sent after: it runs
            assert last["result"]["stopReason"] == "end_turn"
            assert [r.body["messages"][-1]["content"] for r in model.requests] == ["first", "fourth"]


async def test_prompt_deadline_cancels_the_running_prompt_and_expires_the_waiting_one() -> None:
    schema = json.loads((SCHEMAS / "prompt_deadline_exceeded.json").read_text())
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.05, text="slow " * 200), Answer(text="quick", reasoning=""))
        async with spawn_agent("--base-url", model.base_url, "--model", "m", "--prompt-deadline-ms", "3000") as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            running = await agent.request_nowait("session/prompt", _prompt(session_id, "long"))
            waiting = await agent.request_nowait(
                "session/prompt", _prompt(session_id, "short", {"acpServer": {"promptDeadlineMs": 1000}})
            )
            expired, seen_before = await agent.until_response(waiting)
            cut, seen_after = await agent.until_response(running)
            updates = [m for m in seen_before + seen_after if m.get("method") == "session/update"]
            with anyio.fail_after(5):
                await model.wait_for_disconnects(1)
            after = await agent.request("session/prompt", _prompt(session_id, "after"))
            assert after["result"]["stopReason"] == "end_turn"
    for response, deadline in ((expired, 1000), (cut, 3000)):
        error = response["error"]
        assert error["code"] == -32603
        assert error["data"] == {
            "errorKind": "prompt_deadline_exceeded",
            "sessionId": session_id,
            "deadlineMs": deadline,
            "retryable": error["data"]["retryable"],
        }
        jsonschema.validate(error["data"], schema)
    assert updates, "the running prompt streamed before its deadline"
    assert len(model.requests) == 2  # the expired waiting prompt never reached the model


async def test_invalid_deadline_meta_is_invalid_params() -> None:
    async with spawn_agent("--base-url", "http://127.0.0.1:9/v1") as agent:  # an endpoint (never reached)
        await agent.initialize()
        session_id = await agent.new_session()
        reply = await agent.request("session/prompt", _prompt(session_id, "x", {"acpServer": {"promptDeadlineMs": -5}}))
        assert reply["error"]["code"] == -32602


async def test_fork_copies_history_after_the_queued_prompts() -> None:
    async with LoopbackModel() as model:
        model.enqueue(
            Answer(text="one", reasoning="", chunk_delay_s=0.05),
            Answer(text="two", reasoning=""),
            Answer(text="forked", reasoning=""),
        )
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            first = await agent.request_nowait("session/prompt", _prompt(session_id, "q1"))
            fork = await agent.request_nowait(
                "session/fork", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
            )
            forked, seen = await agent.until_response(fork)
            done = [m for m in seen if m.get("id") == first]  # answered before the fork: it waited for q1
            assert done and done[0]["result"]["stopReason"] == "end_turn"
            fork_id = forked["result"]["sessionId"]
            assert fork_id != session_id
            await agent.request("session/prompt", _prompt(session_id, "q2"))
            reply = await agent.request("session/prompt", _prompt(fork_id, "q-fork"))
            assert reply["result"]["stopReason"] == "end_turn"
    contents = [m["content"] for m in model.requests[2].body["messages"][1:]]
    assert contents == ["q1", "one", "q-fork"]  # the fork saw q1 (queued before it), not q2 (after it)


async def test_cancel_request_for_another_request_answers_request_cancelled() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.05, text="running " * 100))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            running = await agent.request_nowait("session/prompt", _prompt(session_id, "first"))
            await model.wait_for_requests(1)
            fork = await agent.request_nowait(
                "session/fork", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
            )
            await agent.notify("$/cancel_request", {"requestId": fork})  # the fork waits behind the running prompt
            reply, _ = await agent.until_response(fork)
            assert reply["error"]["code"] == -32800
            assert reply["error"]["data"]["errorKind"] == "request_cancelled"
            await agent.notify("session/cancel", {"sessionId": session_id})
            first, _ = await agent.until_response(running)
            assert first["result"] == {"stopReason": "cancelled"}
