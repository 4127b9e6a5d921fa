"""A prompt's event stream (``PromptStream``): order, exactly one outcome, backpressure, the reader leaving; and the
same through the bridge — a stream ends before its session's next prompt starts, and a reader that stops reading
holds up its own turn only (virtual time; synchronisation by ``wait_all_tasks_blocked``, never by sleeping)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import trio
import trio.testing
from anyio.abc import TaskGroup

from acp_server.bridge import (
    DEFAULT_STREAM_CAPACITY,
    PromptDeadlineExceededError,
    PromptHandle,
    PromptStream,
    SessionBridge,
    SessionClosedError,
    SessionEntry,
)
from acp_server.domain import Emit, Prompt, PromptEnded, PromptEvent, StopReason, TextChunk, ThoughtChunk

from ._support import ScriptedRunner, prompt, read_all

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


@asynccontextmanager
async def bounded_task_group() -> AsyncIterator[TaskGroup]:
    """A task group under a virtual-time bound: a deadlock fails at once (the clock jumps) instead of hanging."""
    with anyio.fail_after(24 * 3600):
        async with anyio.create_task_group() as tg:
            yield tg


def chunks(name: str, count: int) -> list[TextChunk]:
    return [TextChunk(f"{name}/{i}") for i in range(count)]


class Sender:
    """Sends ``events`` to ``stream`` in a task; ``sent`` counts the sends that have returned."""

    def __init__(self, stream: PromptStream, events: list[TextChunk]) -> None:
        self.stream = stream
        self.events = events
        self.sent = 0

    async def __call__(self) -> None:
        for event in self.events:
            await self.stream.send(event)
            self.sent += 1


# -- the stream alone ----------------------------------------------------------------------------------------


async def test_events_in_order_then_one_outcome_then_the_end() -> None:
    stream = PromptStream()
    events: list[TextChunk | ThoughtChunk] = [TextChunk("a"), ThoughtChunk("b"), TextChunk("c")]
    for event in events:
        await stream.send(event)
    before = stream.ended
    assert before is None
    ended = PromptEnded(stop_reason="end_turn")
    stream.end(ended)
    assert stream.ended is ended
    assert stream.buffered == 4  # the outcome counts as buffered
    assert await read_all(stream) == [*events, ended]
    with pytest.raises(anyio.EndOfStream):
        await stream.receive()
    assert await read_all(stream) == []  # iterating again: already at the end


async def test_the_reader_waits_for_the_writer() -> None:
    stream = PromptStream()
    got: list[PromptEvent] = []

    async def read() -> None:
        got.extend(await read_all(stream))

    async with bounded_task_group() as tg:
        tg.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        await stream.send(TextChunk("x"))
        stream.end(PromptEnded(stop_reason="refusal"))
    assert got == [TextChunk("x"), PromptEnded(stop_reason="refusal")]


async def test_send_waits_at_capacity_and_resumes_when_the_reader_takes_one() -> None:
    stream = PromptStream(capacity=2)
    sender = Sender(stream, chunks("e", 5))
    async with bounded_task_group() as tg:
        tg.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert sender.sent == 2 and stream.buffered == 2  # the third send waits
        await anyio.sleep(3600)  # time does not help: only the reader does
        assert sender.sent == 2
        assert await stream.receive() == TextChunk("e/0")
        await trio.testing.wait_all_tasks_blocked()
        assert sender.sent == 3 and stream.buffered == 2  # one taken, one more in: full again
        assert [await stream.receive() for _ in range(3)] == chunks("e", 5)[1:4]
        await trio.testing.wait_all_tasks_blocked()
    assert sender.sent == 5
    stream.end(PromptEnded(stop_reason="end_turn"))
    assert await read_all(stream) == [TextChunk("e/4"), PromptEnded(stop_reason="end_turn")]


async def test_end_never_waits_and_only_the_first_counts() -> None:
    stream = PromptStream(capacity=1)
    await stream.send(TextChunk("full"))
    first = PromptEnded(error=ValueError("first"))
    stream.end(first)  # synchronous, and over the capacity: the outcome always fits
    stream.end(PromptEnded(stop_reason="end_turn"))
    assert stream.ended is first
    assert stream.buffered == 2
    await stream.send(TextChunk("late"))  # after the end: returns at once, dropped
    assert stream.buffered == 2
    assert await read_all(stream) == [TextChunk("full"), first]


async def test_end_releases_a_blocked_send_without_queueing_its_event() -> None:
    stream = PromptStream(capacity=1)
    sender = Sender(stream, chunks("e", 2))
    async with bounded_task_group() as tg:
        tg.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert sender.sent == 1
        stream.end(PromptEnded(stop_reason="cancelled"))
    assert sender.sent == 2
    assert await read_all(stream) == [TextChunk("e/0"), PromptEnded(stop_reason="cancelled")]


async def test_close_drops_the_buffer_and_a_blocked_send_returns() -> None:
    stream = PromptStream(capacity=2)
    sender = Sender(stream, chunks("e", 4))
    async with bounded_task_group() as tg:
        tg.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert sender.sent == 2
        stream.close()
        assert stream.buffered == 0
    assert sender.sent == 4  # the blocked send returned, the last one did not wait either
    assert stream.buffered == 0
    await stream.send(TextChunk("after"))
    stream.end(PromptEnded(stop_reason="end_turn"))
    assert stream.buffered == 0  # nothing is kept for a reader that left, not even the outcome…
    assert stream.ended == PromptEnded(stop_reason="end_turn")  # …which is still recorded
    with pytest.raises(anyio.ClosedResourceError):
        await stream.receive()
    assert await read_all(stream) == []
    stream.close()  # idempotent
    assert "closed" in repr(stream)


async def test_close_wakes_a_waiting_reader() -> None:
    stream = PromptStream()
    outcome: list[BaseException] = []

    async def read() -> None:
        try:
            await stream.receive()
        except anyio.ClosedResourceError as exc:
            outcome.append(exc)

    async with bounded_task_group() as tg:
        tg.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        stream.close()
    assert len(outcome) == 1


async def test_a_blocked_send_can_be_cancelled() -> None:
    stream = PromptStream(capacity=1)
    await stream.send(TextChunk("full"))
    with anyio.move_on_after(1) as scope:
        await stream.send(TextChunk("never"))
    assert scope.cancelled_caught
    assert await stream.receive() == TextChunk("full")
    await stream.send(TextChunk("next"))  # room again: no leftover waiter holds it up
    assert stream.buffered == 1


def test_capacity_must_be_positive() -> None:
    assert PromptStream(1).buffered == 0
    with pytest.raises(ValueError, match="capacity of at least 1"):
        PromptStream(0)


# -- through the bridge --------------------------------------------------------------------------------------


async def test_a_stream_ends_before_the_next_prompt_of_its_session_starts() -> None:
    handles: list[PromptHandle] = []
    ended_at_start: dict[str, list[PromptEnded | None]] = {}  # prompt -> each stream's outcome as it started

    class Recording(ScriptedRunner):
        async def __call__(self, session: SessionEntry, p: Prompt, emit: Emit, client: object = None, /) -> StopReason:
            ended_at_start[p.title] = [h.events.ended for h in handles]
            return await super().__call__(session, p, emit)

    runner = Recording()
    async with SessionBridge(runner) as bridge:
        session = bridge.create_session("/w")
        handles.append(bridge.send_prompt(session.session_id, prompt("fail:a")))
        handles.append(bridge.send_prompt(session.session_id, prompt("ok:b")))
        handles.append(bridge.send_prompt(session.session_id, prompt("c")))
        first, second, third = handles
        await trio.testing.wait_all_tasks_blocked()
        # Nobody has read a thing: each stream was complete, outcome included, before the next prompt ran.
        a_ended, b_ended, c_ended = ended_at_start["c"]
        assert a_ended is not None and a_ended.error is not None
        assert b_ended == PromptEnded(stop_reason="end_turn")
        assert c_ended is None
        assert ended_at_start["ok:b"][1:] == [None, None]
        assert [first.events.buffered, second.events.buffered] == [3, 3]
        runner.finish("c")
        assert await third.result() == "end_turn"
    assert await read_all(second.events) == [TextChunk("ok:b/1"), TextChunk("ok:b/2"), PromptEnded("end_turn")]


async def test_a_reader_that_stops_reading_holds_up_its_own_turn_only() -> None:
    progress: list[int] = []

    async def chatty(session: SessionEntry, p: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        if p.title != "slow reader":
            await emit(TextChunk(p.title))
            return "end_turn"
        for i in range(5):
            await emit(TextChunk(f"{i}"))
            progress.append(i)
        return "end_turn"

    async with SessionBridge(chatty, stream_capacity=2) as bridge:
        held, free = bridge.create_session("/held"), bridge.create_session("/free")
        slow = bridge.send_prompt(held.session_id, prompt("slow reader"))
        behind = bridge.send_prompt(held.session_id, prompt("behind"))
        await trio.testing.wait_all_tasks_blocked()
        await anyio.sleep(3600)  # virtual time passes: the turn still waits for its reader
        assert progress == [0, 1]  # two events fill the buffer; the third send waits
        assert not slow.done and held.running is slow
        assert not behind.done and behind.events.buffered == 0  # its session's next prompt has not started

        # The other session is not held up.
        others = [bridge.send_prompt(free.session_id, prompt(f"other {i}")) for i in range(3)]
        for handle in others:
            assert await handle.result() == "end_turn"

        assert await slow.events.receive() == TextChunk("0")  # the reader takes one: the turn sends one more
        await trio.testing.wait_all_tasks_blocked()
        assert progress == [0, 1, 2]
        assert not slow.done

        rest = await read_all(slow.events)  # reading on lets it finish
        assert rest == [TextChunk(f"{i}") for i in range(1, 5)] + [PromptEnded(stop_reason="end_turn")]
        assert await slow.result() == "end_turn"
        assert await behind.result() == "end_turn"


async def test_a_reader_that_leaves_lets_its_turn_run_on() -> None:
    sent: list[int] = []

    async def chatty(session: SessionEntry, p: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        for i in range(10):
            await emit(TextChunk(f"{i}"))
            sent.append(i)
        return "max_tokens"

    async with SessionBridge(chatty, stream_capacity=1) as bridge:
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("x"))
        await trio.testing.wait_all_tasks_blocked()
        assert sent == [0]
        handle.events.close()  # the reader leaves: the turn no longer waits for it
        with anyio.fail_after(3600):  # virtual: a turn still waiting fails at once instead of hanging
            assert await handle.result() == "max_tokens"
        assert sent == list(range(10))
        assert handle.events.ended == PromptEnded(stop_reason="max_tokens")
        assert await read_all(handle.events) == []


async def test_a_turn_waiting_for_its_reader_is_still_stopped_by_cancel_deadline_and_close() -> None:
    async def endless(session: SessionEntry, p: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        while True:
            await emit(TextChunk(p.title))

    async with SessionBridge(endless, stream_capacity=1) as bridge:
        session = bridge.create_session("/w")
        accepted = anyio.current_time()
        cancelled = bridge.send_prompt(session.session_id, prompt("c"))
        timed = bridge.send_prompt(session.session_id, prompt("d"), deadline_ms=60_000)
        await trio.testing.wait_all_tasks_blocked()
        assert cancelled.events.buffered == 1  # blocked on its second event
        cancelled.cancel()
        assert await cancelled.result() == "cancelled"
        assert await read_all(cancelled.events) == [TextChunk("c"), PromptEnded(stop_reason="cancelled")]

        with pytest.raises(PromptDeadlineExceededError) as info:
            await timed.result()
        assert anyio.current_time() - accepted == pytest.approx(60)
        assert await read_all(timed.events) == [TextChunk("d"), PromptEnded(error=info.value)]

        closing = bridge.send_prompt(session.session_id, prompt("e"))
        await trio.testing.wait_all_tasks_blocked()
        assert closing.events.buffered == 1
        await bridge.close_session(session.session_id)
        assert closing.done
        assert session.pending_prompt_count == 0
        with pytest.raises(SessionClosedError) as closed:
            await closing.result()
        assert await read_all(closing.events) == [TextChunk("e"), PromptEnded(error=closed.value)]


async def test_the_bridge_default_capacity_is_what_its_streams_buffer() -> None:
    sent: list[int] = []

    async def chatty(session: SessionEntry, p: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        for i in range(DEFAULT_STREAM_CAPACITY + 10):
            await emit(TextChunk(f"{i}"))
            sent.append(i)
        return "end_turn"

    async with SessionBridge(chatty) as bridge:
        session = bridge.create_session("/w")
        handle = bridge.send_prompt(session.session_id, prompt("x"))
        await trio.testing.wait_all_tasks_blocked()
        assert len(sent) == handle.events.buffered == DEFAULT_STREAM_CAPACITY == 256
        events = await read_all(handle.events)
        assert events == [TextChunk(f"{i}") for i in range(DEFAULT_STREAM_CAPACITY + 10)] + [PromptEnded("end_turn")]


# -- coalescing --------------------------------------------------------------------------------------------------


async def test_chunks_waiting_for_a_slow_reader_join_in_order_within_the_limit() -> None:
    from acp_server.domain import TextPart, ThoughtChunk, UserChunk

    stream = PromptStream(capacity=8, coalesce_bytes=6)
    for event in (
        TextChunk("ab"),
        TextChunk("cd"),
        TextChunk("ef"),  # "abcdef": 6 bytes, the limit
        TextChunk("g"),  # would be 7: starts a new entry
        ThoughtChunk("t1"),  # another kind: never joined to text
        ThoughtChunk("t2"),
        UserChunk(TextPart("u")),  # not text: never joined
        TextChunk("h"),
    ):
        await stream.send(event)
    assert stream.buffered == 5
    stream.end(PromptEnded(stop_reason="end_turn"))
    with anyio.fail_after(1):
        got = [event async for event in stream]
    assert got == [
        TextChunk("abcdef"),
        TextChunk("g"),
        ThoughtChunk("t1t2"),
        UserChunk(TextPart("u")),
        TextChunk("h"),
        PromptEnded(stop_reason="end_turn"),
    ]


async def test_a_reader_that_keeps_up_gets_every_chunk_as_it_was_sent() -> None:
    stream = PromptStream(capacity=8, coalesce_bytes=1024)
    got: list[object] = []
    for text in ("a", "b", "c"):
        await stream.send(TextChunk(text))
        got.append(await stream.receive())  # the reader takes each before the next is sent
    assert got == [TextChunk("a"), TextChunk("b"), TextChunk("c")]


async def test_coalescing_keeps_memory_bounded_and_still_holds_the_writer_back() -> None:
    stream = PromptStream(capacity=2, coalesce_bytes=4)
    await stream.send(TextChunk("aaaa"))
    await stream.send(TextChunk("bbbb"))  # full entries: nothing more can join
    with anyio.move_on_after(1) as waited:
        await stream.send(TextChunk("c"))
    assert waited.cancelled_caught  # at capacity: the writer waits although the text is tiny
    assert stream.buffered == 2


async def test_a_sink_gets_what_waited_then_each_event_as_it_is_sent_and_the_writer_never_waits() -> None:
    stream = PromptStream(capacity=2, coalesce_bytes=1024)
    got: list[PromptEvent] = []
    sender = Sender(stream, chunks("e", 6))
    await stream.send(ThoughtChunk("t"))
    async with bounded_task_group() as tg:
        tg.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert sender.sent == 1 and not stream.delivered  # full (t, e/0): e/1 waits; no reader yet
        stream.deliver_to(got.append)
        assert got == [ThoughtChunk("t"), TextChunk("e/0")] and stream.buffered == 0 and stream.delivered
        await trio.testing.wait_all_tasks_blocked()
    assert got[2:] == chunks("e", 6)[1:]  # each handed over as sent (no reader task): none merged, none held back
    assert not stream.released
    stream.end(PromptEnded(stop_reason="end_turn"))
    assert got[-1] == PromptEnded(stop_reason="end_turn") and stream.released and stream.delivered
    await stream.send(TextChunk("late"))  # after the end: dropped
    assert len(got) == 8


async def test_a_sink_attached_after_the_end_gets_everything_then_the_outcome_and_may_close_the_stream() -> None:
    stream = PromptStream(capacity=4)
    await stream.send(TextChunk("a"))
    stream.end(PromptEnded(stop_reason="cancelled"))
    got: list[PromptEvent] = []

    def sink(event: PromptEvent) -> None:
        got.append(event)
        if isinstance(event, PromptEnded):
            stream.close()

    stream.deliver_to(sink)
    assert got == [TextChunk("a"), PromptEnded(stop_reason="cancelled")]
    assert stream.released and stream.buffered == 0


async def test_several_may_wait_for_delivery_at_once() -> None:
    stream = PromptStream(capacity=4, coalesce_bytes=1024)
    await stream.send(TextChunk("a"))
    woken: list[int] = []

    async def wait(n: int) -> None:
        await stream.wait_delivered()
        woken.append(n)

    async with bounded_task_group() as tg:
        tg.start_soon(wait, 1)
        tg.start_soon(wait, 2)  # subagents side by side: neither may lose the other's wake-up
        await trio.testing.wait_all_tasks_blocked()
        assert woken == []
        tg.start_soon(read_all, stream)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(woken) == [1, 2]
        stream.end(PromptEnded(stop_reason="end_turn"))
