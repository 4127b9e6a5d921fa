"""``session/prompt`` over a real bridge with a fake peer: relay in order, admission, cancellation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp.schema import SessionNotification

from acp_server.bridge import PromptQueueFullError, SessionNotFoundError

from ._support import Bound, FakePeer, bound

pytestmark = pytest.mark.anyio


def chunk(session_id: str, kind: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}


async def wait_pending(b: Bound, session_id: str, count: int) -> None:
    """Let the prompt tasks reach their waits (admission is synchronous), then check how many were admitted."""
    await anyio.wait_all_tasks_blocked()
    assert b.bridge.get(session_id).pending_prompt_count == count


async def test_a_prompt_relays_its_events_as_session_updates_in_order_then_answers_its_stop_reason() -> None:
    async with bound() as b:
        session_id = await b.new_session()
        peer = b.peer(41)
        reply = await b.prompt(session_id, "emit:3", peer)
    assert reply == {"stopReason": "end_turn"}
    [(_, info)] = [n for n in peer.notifications if n[1]["update"]["sessionUpdate"] == "session_info_update"]
    assert info["update"]["title"] == "emit:3"  # the first prompt titles the session: announced first
    expected = [("session/update", info)]
    for i in range(3):
        expected += [
            ("session/update", chunk(session_id, "agent_thought_chunk", f"t{i}")),
            ("session/update", chunk(session_id, "agent_message_chunk", f"c{i}")),
        ]
    assert peer.notifications == expected
    assert [kind for kind, _ in peer.log] == ["admitted"] + ["notify"] * 7  # admitted before the first update
    for _, params in peer.notifications:
        SessionNotification.model_validate(params)


@pytest.mark.parametrize("reason", ["end_turn", "max_tokens", "refusal"])
async def test_the_answer_is_the_turns_stop_reason(reason: str) -> None:
    async with bound() as b:
        session_id = await b.new_session()
        assert await b.prompt(session_id, f"stop:{reason}", b.peer()) == {"stopReason": reason}


async def test_admitted_is_reported_after_admission_and_never_for_a_refused_prompt() -> None:
    async with bound(max_pending=1) as b, anyio.create_task_group() as tg:
        session_id = await b.new_session()
        first = b.peer(1)
        replies: dict[int, Any] = {}

        async def run(peer: FakePeer, text: str) -> None:
            replies[peer.request_id] = await b.prompt(session_id, text, peer)  # type: ignore[index]

        tg.start_soon(run, first, "block")
        with anyio.fail_after(5):
            await b.runner.running.wait()
        assert first.admissions == [{session_id: 1}]  # reported once the prompt counted against the limit

        refused = b.peer(2)
        with pytest.raises(PromptQueueFullError):
            await b.prompt(session_id, "emit:1", refused)
        assert refused.log == []
        assert b.bridge.get(session_id).pending_prompt_count == 1

        unknown = b.peer(3)
        with pytest.raises(SessionNotFoundError):
            await b.prompt("no-such-session", "emit:1", unknown)
        assert unknown.log == []

        b.runner.release()
    assert replies == {1: {"stopReason": "end_turn"}}
    assert b.runner.started == ["block"]


async def test_cancel_request_of_a_queued_prompt_answers_it_cancelled_and_leaves_the_running_one() -> None:
    async with bound(max_pending=3) as b, anyio.create_task_group() as tg:
        session_id = await b.new_session()
        replies: dict[Any, Any] = {}

        async def run(request_id: Any, text: str) -> None:
            replies[request_id] = await b.prompt(session_id, text, b.peer(request_id))

        tg.start_soon(run, "running", "block")
        with anyio.fail_after(5):
            await b.runner.running.wait()
        tg.start_soon(run, "queued", "emit:2")
        await wait_pending(b, session_id, 2)

        note = b.peer(None)
        b.notifications["$/cancel_request"]({"requestId": "queued"}, note)
        await anyio.wait_all_tasks_blocked()
        assert replies["queued"] == {"stopReason": "cancelled"}
        assert note.cancel_requests == []  # the agent's own prompt: not handed to the dispatcher
        assert b.runner.cancelled == []
        assert b.bridge.get(session_id).pending_prompt_count == 1

        b.notifications["$/cancel_request"]({"requestId": 77}, note)  # not a prompt: the dispatcher's business
        assert note.cancel_requests == [77]

        b.notifications["session/cancel"]({"sessionId": session_id}, note)
    assert replies == {"queued": {"stopReason": "cancelled"}, "running": {"stopReason": "cancelled"}}
    assert b.runner.started == ["block"]  # the queued prompt never ran
    assert b.runner.cancelled == ["block"]


async def test_session_cancel_answers_the_running_and_every_queued_prompt_cancelled_and_starts_none() -> None:
    async with bound(max_pending=3) as b, anyio.create_task_group() as tg:
        session_id = await b.new_session()
        replies: dict[Any, Any] = {}

        async def run(request_id: Any, text: str) -> None:
            replies[request_id] = await b.prompt(session_id, text, b.peer(request_id))

        tg.start_soon(run, "running", "block")
        with anyio.fail_after(5):
            await b.runner.running.wait()
        tg.start_soon(run, "queued 1", "emit:1")
        tg.start_soon(run, "queued 2", "emit:2")
        await wait_pending(b, session_id, 3)
        b.notifications["session/cancel"]({"sessionId": session_id}, b.peer(None))
    assert replies == {name: {"stopReason": "cancelled"} for name in ("running", "queued 1", "queued 2")}
    assert b.runner.started == ["block"]  # no queued prompt started


async def test_session_cancel_with_nothing_running_is_a_no_op() -> None:
    async with bound() as b:
        session_id = await b.new_session()
        b.notifications["session/cancel"]({"sessionId": session_id}, b.peer(None))
        assert await b.prompt(session_id, "emit:1", b.peer()) == {"stopReason": "end_turn"}


async def test_cancel_all_cancels_running_and_queued_prompts_each_answering_cancelled() -> None:
    async with bound(max_pending=3) as b:
        session_id = await b.new_session()
        replies: dict[Any, Any] = {}

        async def run(request_id: Any, text: str) -> None:
            replies[request_id] = await b.prompt(session_id, text, b.peer(request_id))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, 1, "block")
            with anyio.fail_after(5):
                await b.runner.running.wait()
            tg.start_soon(run, 2, "emit:1")
            tg.start_soon(run, 3, "emit:1")
            await wait_pending(b, session_id, 3)
            b.agent.cancel_all()
        assert b.bridge.get(session_id).pending_prompt_count == 0
    assert replies == {1: {"stopReason": "cancelled"}, 2: {"stopReason": "cancelled"}, 3: {"stopReason": "cancelled"}}
    assert b.runner.started == ["block"]


async def test_cancel_prompt_by_request_id() -> None:
    async with bound() as b, anyio.create_task_group() as tg:
        session_id = await b.new_session()
        replies: list[Any] = []

        async def run() -> None:
            replies.append(await b.prompt(session_id, "block", b.peer("r")))

        tg.start_soon(run)
        with anyio.fail_after(5):
            await b.runner.running.wait()
        assert b.agent.cancel_prompt("other") is False
        assert b.agent.cancel_prompt("r") is True
    assert replies == [{"stopReason": "cancelled"}]


async def test_a_prompt_whose_caller_is_cancelled_cancels_its_turn() -> None:
    async with bound() as b:
        session_id = await b.new_session()
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await b.prompt(session_id, "block", b.peer(5))

            tg.start_soon(run)
            with anyio.fail_after(5):
                await b.runner.running.wait()
            tg.cancel_scope.cancel()
        await anyio.wait_all_tasks_blocked()
        assert b.bridge.get(session_id).pending_prompt_count == 0
        assert b.runner.cancelled == ["block"]
        assert b.agent.cancel_prompt(5) is False  # forgotten once answered
