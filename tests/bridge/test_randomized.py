"""Random mixes of every outcome: the limit is never exceeded and each slot is released exactly once.

Each example runs its own trio loop on a MockClock, so sleeps and deadlines are virtual.
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
    CancelSignal,
    PromptCancelledError,
    PromptDeadlineExceededError,
    PromptHandle,
    PromptQueueFullError,
    SessionBridge,
    SessionClosedError,
    SessionEntry,
    SessionNotFoundError,
)
from acp_server.domain import Emit, Prompt, StopReason

from ._support import Boom, ScriptedRunner, discard, prompt

SESSIONS = 2

# Kinds repeated to weight them: mostly sends and completions, so queues fill up and drain.
KINDS = (
    ["send"] * 6
    + ["finish"] * 3
    + ["fail", "cancel", "cancel", "cancel_running", "sleep", "sleep", "fork", "close", "send_precancelled"]
)
SLEEPS = (0.05, 0.15, 0.5)
DEADLINES = (None, None, 100, 300)


def decode(kind: str, a: int, b: int) -> tuple[Any, ...]:
    """One op from a kind and two small integers (so hypothesis and a seeded RNG share one op language)."""
    if kind == "send":
        return (kind, a % SESSIONS, DEADLINES[b % len(DEADLINES)])
    if kind == "sleep":
        return (kind, SLEEPS[b % len(SLEEPS)])
    if kind == "cancel":
        return (kind, b)
    return (kind, a % SESSIONS)


op = st.builds(decode, st.sampled_from(KINDS), st.integers(0, 7), st.integers(0, 1000))


class CountingRunner(ScriptedRunner):
    """Also checks that a session never runs two prompts at once."""

    def __init__(self) -> None:
        super().__init__()
        self.active: Counter[str] = Counter()

    async def __call__(self, session: SessionEntry, prompt: Prompt, emit: Emit) -> StopReason:
        self.active[session.session_id] += 1
        assert self.active[session.session_id] == 1
        try:
            return await super().__call__(session, prompt, emit)
        finally:
            self.active[session.session_id] -= 1


async def scenario(limit: int, default_deadline: int | None, ops: list[tuple[Any, ...]]) -> None:
    runner = CountingRunner()
    releases: Counter[str] = Counter()
    original = SessionEntry._release_slot

    def counting_release(self: SessionEntry) -> None:
        releases[self.session_id] += 1
        original(self)

    accepted: dict[str, list[PromptHandle]] = {}  # session id -> handles in acceptance order
    everything: list[PromptHandle] = []
    due: dict[str, float] = {}  # prompt id -> virtual time its deadline falls
    names = iter(f"p{n}" for n in range(10_000))

    with mock.patch.object(SessionEntry, "_release_slot", counting_release):
        async with (
            SessionBridge(
                runner, max_pending_prompts_per_session=limit, prompt_deadline_ms=default_deadline
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
                        handle = bridge.send_prompt(
                            session.session_id, prompt(next(names)), emit=discard, deadline_ms=entry[2]
                        )
                    except PromptQueueFullError as exc:
                        assert before >= limit
                        assert exc.pending_count == before == limit
                    else:
                        assert before < limit
                        if handle.deadline_ms is not None:
                            due[handle.prompt_id] = anyio.current_time() + handle.deadline_ms / 1000
                        accepted.setdefault(session.session_id, []).append(handle)
                        everything.append(handle)
                elif kind == "send_precancelled":
                    session = sessions[entry[1]]
                    signal = CancelSignal()
                    signal.set()
                    before = session.pending_prompt_count
                    try:
                        bridge.send_prompt(
                            session.session_id, prompt(next(names)), emit=discard, cancel=signal
                        )
                    except PromptCancelledError:
                        pass
                    else:
                        raise AssertionError("a pre-cancelled prompt was admitted")
                    assert session.pending_prompt_count == before
                elif kind == "cancel" and everything:
                    everything[entry[1] % len(everything)].cancel()
                elif kind in ("finish", "fail"):
                    running = sessions[entry[1]].running
                    if running is not None:
                        name = running.prompt.title
                        runner.finish(name) if kind == "finish" else runner.fail(name)
                elif kind == "cancel_running":
                    bridge.cancel_running(sessions[entry[1]].session_id)
                elif kind == "sleep":
                    await anyio.sleep(entry[1])
                elif kind == "fork":
                    forks.start_soon(fork_quietly, sessions[entry[1]].session_id)
                elif kind == "close":
                    index = entry[1]
                    await bridge.close_session(sessions[index].session_id)
                    assert sessions[index].pending_prompt_count == 0
                    assert releases[sessions[index].session_id] == len(
                        accepted.get(sessions[index].session_id, [])
                    )
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
        with contextlib.suppress(Boom, PromptDeadlineExceededError, SessionClosedError, BridgeClosedError):
            await handle.result()
    assert all(session.pending_prompt_count == 0 for session in sessions)
    assert sum(runner.active.values()) == 0


def run_bounded(limit: int, default_deadline: int | None, ops: list[tuple[Any, ...]]) -> None:
    async def bounded() -> None:
        with trio.fail_after(24 * 3600):  # virtual: a deadlock fails fast instead of hanging the run
            await scenario(limit, default_deadline, ops)

    trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    limit=st.integers(1, 6),
    default_deadline=st.sampled_from([None, 200, 1000]),
    ops=st.lists(op, min_size=5, max_size=80),
)
def test_random_mixes_keep_the_count_exact(
    limit: int, default_deadline: int | None, ops: list[tuple[Any, ...]]
) -> None:
    run_bounded(limit, default_deadline, ops)


@pytest.mark.parametrize("seed", range(40))
def test_long_seeded_runs_keep_the_count_exact(seed: int) -> None:
    rng = random.Random(seed)
    ops = [decode(rng.choice(KINDS), rng.randrange(8), rng.randrange(1000)) for _ in range(400)]
    run_bounded(rng.randint(1, 6), rng.choice([None, 200, 1000]), ops)
