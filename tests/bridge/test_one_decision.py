"""A prompt's reply and its stored answer come from one decision: a cancel or a deadline that arrives while the
answer is being written changes neither; and a settled prompt is forgotten at once, even with a long deadline."""

from __future__ import annotations

import gc
import weakref
from typing import Literal

import anyio
import pytest

from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.domain import ContextUsage, Emit, Message, ModelStep, Prompt, StopReason, TextChunk, TextPart
from acp_server.store import MemorySessionStore, TurnTicket

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


class SlowToCommit(MemorySessionStore):
    """Its ``end_turn`` waits for :attr:`gate` (another process holding the database lock, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()
        self.writing = anyio.Event()

    async def end_turn(
        self,
        ticket: TurnTicket,
        *,
        content: str,
        reasoning: str,
        stop_reason: StopReason | None,
        outcome: Literal["complete", "failed", "cancelled"],
        steps: tuple[ModelStep, ...] = (),
        usage: ContextUsage | None = None,
    ) -> None:
        self.writing.set()
        await self.gate.wait()
        await super().end_turn(
            ticket,
            content=content,
            reasoning=reasoning,
            stop_reason=stop_reason,
            outcome=outcome,
            steps=steps,
            usage=usage,
        )


async def complete_turn(session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
    """What the model turn does on success: record the prompt, stream, record the answer shielded, return."""
    await session.begin_turn(prompt, Message("user", prompt.title))
    await emit(TextChunk("the whole answer"))
    with anyio.CancelScope(shield=True):
        await session.end_turn(Message("assistant", "the whole answer", "", "end_turn", "complete"))
    return "end_turn"


async def _stored_answer(store: MemorySessionStore, session_id: str) -> tuple[str, StopReason | None]:
    snapshot = await store.read_session(session_id)
    assert snapshot is not None
    answer = snapshot.messages[-1]
    return answer.outcome, answer.stop_reason


@pytest.mark.parametrize("late", ["deadline", "cancel"])
async def test_what_arrives_while_the_answer_is_written_changes_neither_reply_nor_store(late: str) -> None:
    store = SlowToCommit()
    async with store, SessionBridge(complete_turn, store=store, prompt_deadline_ms=1_000) as bridge:
        session = await bridge.open_session("/w")
        handle = bridge.send_prompt(session.session_id, Prompt((TextPart("hi"),)))
        await store.writing.wait()
        if late == "deadline":
            await anyio.sleep(5)  # virtual: the deadline passes while the store is locked
        else:
            handle.cancel()
        store.gate.set()
        assert await handle.result() == "end_turn"
        assert await _stored_answer(store, session.session_id) == ("complete", "end_turn")
        assert session.conversation.messages[-1].outcome == "complete"


async def test_a_prompt_cut_short_before_its_answer_is_written_is_stored_cut_short() -> None:
    started = anyio.Event()

    async def waits_then_completes(
        session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /
    ) -> StopReason:
        await session.begin_turn(prompt, Message("user", prompt.title))
        started.set()
        with anyio.CancelScope(shield=True):  # a turn that finishes its answer even when cancelled meanwhile
            await anyio.sleep(5)
            await session.end_turn(Message("assistant", "late", "", "end_turn", "complete"))
        return "end_turn"

    store = MemorySessionStore()
    async with store, SessionBridge(waits_then_completes, store=store) as bridge:
        session = await bridge.open_session("/w")
        handle = bridge.send_prompt(session.session_id, Prompt((TextPart("hi"),)))
        await started.wait()
        handle.cancel()
        assert await handle.result() == "cancelled"
        assert await _stored_answer(store, session.session_id) == ("cancelled", "cancelled")


class _TrackedText(TextPart):
    """A text part that can be watched with a weak reference (the dataclass itself has slots)."""


async def test_a_settled_prompt_is_not_kept_until_its_deadline() -> None:
    async def answers(session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        return "end_turn"

    async with SessionBridge(answers, prompt_deadline_ms=3_600_000) as bridge:
        session = bridge.create_session("/w")
        part = _TrackedText("a large prompt")
        watched = weakref.ref(part)
        handle = bridge.send_prompt(session.session_id, Prompt((part,)))
        assert await handle.result() == "end_turn"
        handle.events.close()
        del handle, part
        await anyio.wait_all_tasks_blocked()  # the session's worker has moved on
        gc.collect()
        assert watched() is None, "the deadline watch still holds a prompt that has settled"


async def test_a_deadline_beyond_any_clock_is_refused_before_anything_is_counted() -> None:
    async def answers(session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        return "end_turn"

    async with SessionBridge(answers) as bridge:
        session = bridge.create_session("/w")
        with pytest.raises(ValueError, match="at most"):
            bridge.send_prompt(session.session_id, Prompt((TextPart("x"),)), deadline_ms=10**400)
        assert session.pending_prompt_count == 0
    with pytest.raises(ValueError, match="at most"):
        SessionBridge(answers, prompt_deadline_ms=2**60)
