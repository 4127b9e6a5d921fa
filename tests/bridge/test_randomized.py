"""Random mixes of every outcome: the limit is never exceeded, each slot is released exactly once, and every
prompt's stream is its turn's events then exactly one outcome (ended before the session's next prompt starts).

Each example runs its own trio loop on a MockClock, so sleeps and deadlines are virtual. Streams are read a bit at
a time or abandoned at random; with a capacity of 1 a turn waits for its reader on its second event.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from typing import Any
from unittest import mock

import anyio
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_server.bridge import (
    BridgeClosedError,
    PromptDeadlineExceededError,
    PromptHandle,
    PromptQueueFullError,
    SessionBridge,
    SessionClosedError,
    SessionEntry,
    SessionNotFoundError,
)
from acp_server.bridge._fifo import Fifo
from acp_server.bridge._prompt import PromptJob
from acp_server.domain import Emit, Prompt, PromptEnded, PromptEvent, StopReason, TextChunk

from ._support import Boom, ScriptedRunner, prompt, read_all

SESSIONS = 2

# Kinds repeated to weight them: mostly sends and completions, so queues fill up and drain.
KINDS = (
    ["send"] * 6
    + ["finish"] * 3
    + ["read"] * 3
    + ["fail", "cancel", "cancel", "cancel_session", "sleep", "sleep", "fork", "close", "close_stream"]
)
SLEEPS = (0.05, 0.15, 0.5)
DEADLINES = (None, None, 100, 300)
CAPACITIES = (1, 2, 256)  # 1: a turn waits for its reader on its second event


def decode(kind: str, a: int, b: int) -> tuple[Any, ...]:
    """One op from a kind and two small integers (so hypothesis and a seeded RNG share one op language)."""
    if kind == "send":
        return (kind, a % SESSIONS, DEADLINES[b % len(DEADLINES)])
    if kind == "sleep":
        return (kind, SLEEPS[b % len(SLEEPS)])
    if kind in ("cancel", "read", "close_stream"):
        return (kind, b)
    return (kind, a % SESSIONS)


op = st.builds(decode, st.sampled_from(KINDS), st.integers(0, 7), st.integers(0, 1000))


class CountingRunner(ScriptedRunner):
    """Also checks that a session never runs two prompts at once, and that every prompt accepted before this one
    in its session has settled and ended its stream."""

    def __init__(self, accepted: dict[str, list[PromptHandle]]) -> None:
        super().__init__()
        self.active: Counter[str] = Counter()
        self._accepted = accepted

    async def __call__(self, session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        self.active[session.session_id] += 1
        assert self.active[session.session_id] == 1
        titles = [h.prompt.title for h in self._accepted[session.session_id]]
        for earlier in self._accepted[session.session_id][: titles.index(prompt.title)]:
            assert earlier.done and earlier.events.ended is not None
        try:
            return await super().__call__(session, prompt, emit)
        finally:
            self.active[session.session_id] -= 1


def check_stream(handle: PromptHandle, events: list[PromptEvent], started: list[str], capacity: int) -> None:
    """What a prompt's stream yielded, read to its end: its turn's events in order, then its one outcome."""
    name = handle.prompt.title
    *turn, ended = events
    expected = [TextChunk(f"{name}/1"), TextChunk(f"{name}/2")] if name in started else []
    # With room for both, a turn's two events are in before it can be stopped; at capacity 1 it may be stopped
    # while waiting to send its second.
    assert turn == (expected if capacity >= 2 else expected[: len(turn)])
    assert isinstance(ended, PromptEnded)
    assert handle.events.ended is ended
    if ended.error is None:
        assert ended.stop_reason is not None
    else:
        assert ended.stop_reason is None


async def scenario(limit: int, default_deadline: int | None, capacity: int, ops: list[tuple[Any, ...]]) -> None:
    accepted: dict[str, list[PromptHandle]] = {}  # session id -> handles in acceptance order
    runner = CountingRunner(accepted)
    releases: Counter[str] = Counter()  # session id -> slots released
    released: Counter[str] = Counter()  # prompt id -> times released
    original = Fifo.settle

    def counting_settle(self: Fifo[Any], job: PromptJob) -> None:
        releases[job.session_id] += 1
        released[job.prompt_id] += 1
        assert released[job.prompt_id] == 1, "a prompt released its slot twice"
        original(self, job)

    everything: list[PromptHandle] = []
    read: dict[str, list[PromptEvent]] = {}  # prompt id -> what the test has read so far
    abandoned: set[str] = set()  # prompt ids whose reader left (close)
    due: dict[str, float] = {}  # prompt id -> virtual time its deadline falls
    names = iter(f"p{n}" for n in range(10_000))

    with mock.patch.object(Fifo, "settle", counting_settle):
        async with (
            SessionBridge(
                runner,
                max_pending_prompts_per_session=limit,
                prompt_deadline_ms=default_deadline,
                stream_capacity=capacity,
            ) as bridge,
            anyio.create_task_group() as forks,
        ):
            sessions = [bridge.create_session(f"/s{i}", session_id=f"s{i}") for i in range(SESSIONS)]

            async def fork_quietly(session_id: str) -> None:
                with contextlib.suppress(SessionClosedError, BridgeClosedError, SessionNotFoundError):
                    await bridge.fork(session_id)

            def check() -> None:
                for session in sessions:
                    handles = accepted.get(session.session_id, [])
                    unsettled = [h for h in handles if not h.done]
                    assert session.pending_prompt_count == len(unsettled)
                    assert session.pending_prompt_count <= limit
                    assert releases[session.session_id] == len(handles) - len(unsettled)
                    now = anyio.current_time()
                    assert all(now < due[h.prompt_id] for h in unsettled if h.prompt_id in due)
                    assert session.running is None or session.running in unsettled
                    order = [h.prompt.title for h in handles]
                    started = [name for name in runner.started if name in order]
                    assert started == sorted(started, key=order.index)  # FIFO

            for entry in ops:
                kind = entry[0]
                if kind == "send":
                    session = sessions[entry[1]]
                    before = session.pending_prompt_count
                    try:
                        handle = bridge.send_prompt(session.session_id, prompt(next(names)), deadline_ms=entry[2])
                    except PromptQueueFullError as exc:
                        assert before >= limit
                        assert exc.pending_count == before == limit
                    else:
                        assert before < limit
                        if handle.deadline_ms is not None:
                            due[handle.prompt_id] = anyio.current_time() + handle.deadline_ms / 1000
                        accepted.setdefault(session.session_id, []).append(handle)
                        everything.append(handle)
                elif kind == "read" and everything:
                    handle = everything[entry[1] % len(everything)]
                    if handle.events.buffered:  # never blocks: something is there
                        read.setdefault(handle.prompt_id, []).append(await handle.events.receive())
                elif kind == "close_stream" and everything:
                    handle = everything[entry[1] % len(everything)]
                    handle.events.close()
                    abandoned.add(handle.prompt_id)
                    assert handle.events.buffered == 0
                elif kind == "cancel" and everything:
                    everything[entry[1] % len(everything)].cancel()
                elif kind in ("finish", "fail"):
                    running = sessions[entry[1]].running
                    if running is not None:
                        name = running.prompt.title
                        runner.finish(name) if kind == "finish" else runner.fail(name)
                elif kind == "cancel_session":
                    bridge.cancel_session(sessions[entry[1]].session_id)
                elif kind == "sleep":
                    await anyio.sleep(entry[1])
                elif kind == "fork":
                    forks.start_soon(fork_quietly, sessions[entry[1]].session_id)
                elif kind == "close":
                    index = entry[1]
                    await bridge.close_session(sessions[index].session_id)
                    assert sessions[index].pending_prompt_count == 0
                    assert releases[sessions[index].session_id] == len(accepted.get(sessions[index].session_id, []))
                    accepted.pop(sessions[index].session_id, None)
                    releases.pop(sessions[index].session_id, None)
                    sessions[index] = bridge.create_session(f"/s{index}", session_id=f"s{index}")
                await trio.testing.wait_all_tasks_blocked()
                check()
            await bridge.aclose()
            for session in sessions:
                assert session.pending_prompt_count == 0
                assert releases[session.session_id] == len(accepted.get(session.session_id, []))

    for handle in everything:
        assert handle.done
        assert released[handle.prompt_id] == 1
        with contextlib.suppress(Boom, PromptDeadlineExceededError, SessionClosedError, BridgeClosedError):
            await handle.result()
        so_far = read.get(handle.prompt_id, [])
        rest = await read_all(handle.events)
        if handle.prompt_id in abandoned:
            assert rest == []  # the reader left: nothing more comes
            assert sum(isinstance(event, PromptEnded) for event in so_far) <= 1
            if so_far and isinstance(so_far[-1], PromptEnded):
                check_stream(handle, so_far, runner.started, capacity)
        else:
            check_stream(handle, so_far + rest, runner.started, capacity)
            outcome = (so_far + rest)[-1]
            assert isinstance(outcome, PromptEnded)
            try:
                result: StopReason | Exception = await handle.result()
            except Exception as exc:
                result = exc
            assert result is (outcome.error if outcome.error is not None else outcome.stop_reason)
    assert all(session.pending_prompt_count == 0 for session in sessions)
    assert sum(runner.active.values()) == 0


def run_bounded(limit: int, default_deadline: int | None, capacity: int, ops: list[tuple[Any, ...]]) -> None:
    async def bounded() -> None:
        with trio.fail_after(24 * 3600):  # virtual: a deadlock fails fast instead of hanging the run
            await scenario(limit, default_deadline, capacity, ops)

    trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    limit=st.integers(1, 6),
    default_deadline=st.sampled_from([None, 200, 1000]),
    capacity=st.sampled_from(CAPACITIES),
    ops=st.lists(op, min_size=5, max_size=80),
)
def test_random_mixes_keep_the_count_exact(
    limit: int, default_deadline: int | None, capacity: int, ops: list[tuple[Any, ...]]
) -> None:
    run_bounded(limit, default_deadline, capacity, ops)


@pytest.mark.parametrize("seed", range(40))
def test_long_seeded_runs_keep_the_count_exact(seed: int) -> None:
    rng = random.Random(seed)
    ops = [decode(rng.choice(KINDS), rng.randrange(8), rng.randrange(1000)) for _ in range(400)]
    run_bounded(rng.randint(1, 6), rng.choice([None, 200, 1000]), rng.choice(CAPACITIES), ops)
