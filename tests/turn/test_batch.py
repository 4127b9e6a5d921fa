"""Tool calls of one answer in batches: consecutive ``task`` calls side by side (at most ``limit`` at once), the
others alone and in order, records in call order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import pytest

from acp_server.domain import ToolCallRecord
from acp_server.turn._batch import run_in_batches

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class _Call:
    name: str
    call_id: str


async def _run(calls: list[_Call], limit: int) -> tuple[list[str], int, list[str]]:
    running, peak, log = 0, 0, list[str]()
    records: list[ToolCallRecord] = []
    gate = anyio.Event()

    async def run_one(call: _Call, done: Callable[[ToolCallRecord], None]) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        log.append(f"start {call.call_id}")
        if call.name == "task" and running >= min(limit, sum(c.name == "task" for c in calls)):
            gate.set()  # as many children as may run are running
        if call.name == "task":
            await gate.wait()
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        running -= 1
        log.append(f"end {call.call_id}")
        done(ToolCallRecord(call.call_id, call.name, "{}", "", "completed", call.call_id, "think"))

    async def after() -> None:
        log.append("after")

    await run_in_batches(calls, run_one, limit=limit, done=records.append, after=after)
    return [r.call_id for r in records], peak, log


async def test_consecutive_tasks_run_at_once_up_to_the_limit() -> None:
    calls = [_Call("read_file", "r"), *(_Call("task", f"t{i}") for i in range(4)), _Call("read_file", "w")]
    order, peak, log = await _run(calls, limit=3)
    assert order == ["r", "t0", "t1", "t2", "t3", "w"]
    assert peak == 3
    assert log[:3] == ["start r", "end r", "after"] and log[-3:] == ["start w", "end w", "after"]
    assert log.count("after") == 3  # one per batch


async def test_a_limit_of_one_runs_tasks_one_by_one() -> None:
    order, peak, _ = await _run([_Call("task", "a"), _Call("task", "b")], limit=1)
    assert (order, peak) == (["a", "b"], 1)


async def test_children_running_at_once_ask_permission_one_at_a_time() -> None:
    from acp_server.domain import ToolCallStarted
    from acp_server.tools import PermissionChoice
    from acp_server.turn._subagent import _NamedAsker

    asking, peak, titles = 0, 0, list[str]()
    release = anyio.Event()

    class _Client:
        async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
            nonlocal asking, peak
            asking += 1
            peak = max(peak, asking)
            titles.append(call.title)
            await release.wait()
            asking -= 1
            return "allow_once"

    lock, client = anyio.Lock(), _Client()
    choices: list[PermissionChoice] = []

    async def child(name: str) -> None:
        asker = _NamedAsker(client, name, lock)
        choices.append(await asker.request_permission(ToolCallStarted(name, "Write x", "edit")))

    async with anyio.create_task_group() as group:
        group.start_soon(child, "A")
        group.start_soon(child, "B")
        while not titles:
            await anyio.lowlevel.checkpoint()
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        assert len(titles) == 1  # the other child waits for the first answer
        release.set()
    assert peak == 1 and sorted(titles) == ["[A] Write x", "[B] Write x"] and choices == ["allow_once"] * 2
