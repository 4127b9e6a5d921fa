"""The prompt deadline while a tool call waits for a permission that never comes: the real ``ModelTurn`` over the
loopback model through the bridge, on trio's virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import trio.lowlevel
import trio.testing

from acp_server.bridge import PromptDeadlineExceededError, PromptHandle, SessionBridge, SessionEntry
from acp_server.domain import (
    Emit,
    Prompt,
    PromptEnded,
    StopReason,
    TextContent,
    ToolCallStarted,
    ToolCallUpdated,
    UsageReported,
)
from acp_server.provider import import_client_modules
from acp_server.provider.offline import LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import ToolClient
from acp_server.turn import ModelSettings, ModelTurn

from ..turn._tools_support import Editor, Hold, text_prompt
from ._support import read_all

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    # Virtual time must not jump while the turn waits on real work: the first import of the model client (done in
    # a worker thread: over a second on a loaded machine when this test runs alone; imported up front below), the
    # store's thread, the loopback model's answer. The clock jumps at once only from the permission wait on (see
    # ``jump_once_asked``); before that, only a real second with every task idle would make it jump.
    pytest.mark.virtual_time(autojump=1.0),
]

DEADLINE_MS = 30_000


async def jump_once_asked(hold: Hold) -> None:
    """From the moment the permission is asked, idle virtual time passes at once."""
    await hold.asked.wait()
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    clock.autojump_threshold = 0.0


class LateEmits:
    """The real turn, with its ``emit`` watched: what it sends once its prompt has ended would be lost."""

    def __init__(self, turn: ModelTurn) -> None:
        self.turn = turn
        self.handle: PromptHandle | None = None
        self.late: list[Any] = []

    async def __call__(
        self, session: SessionEntry, prompt: Prompt, emit: Emit, client: ToolClient | None, /
    ) -> StopReason:
        async def watched(event: Any) -> None:
            assert self.handle is not None
            if self.handle.events.ended is not None:
                self.late.append(event)
            await emit(event)

        return await self.turn(session, prompt, watched, client)


async def test_the_deadline_ends_a_prompt_stuck_in_a_permission_wait_at_the_deadline(tmp_path: Path) -> None:
    import_client_modules()  # as the warm-up does before a real first prompt
    write = ScriptedCall("write_file", {"path": "new.txt", "content": "x\n"}, id="w1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((write,)))
        turn = ModelTurn(ModelSettings(base_url=model.base_url, model="m"))
        runner = LateEmits(turn)
        try:
            async with SessionBridge(runner, prompt_deadline_ms=DEADLINE_MS) as bridge:
                entry = await bridge.open_session(str(tmp_path))
                hold = Hold()  # the user never answers
                start = anyio.current_time()
                client = Editor(hold).tool_client
                handle = runner.handle = bridge.send_prompt(entry.session_id, text_prompt("write"), client=client)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(jump_once_asked, hold)
                    events = await read_all(handle.events)
                    tg.cancel_scope.cancel()
                ended_at = anyio.current_time()
                with pytest.raises(PromptDeadlineExceededError) as caught:
                    await handle.result()
                snapshot = await bridge.store.read_session(entry.session_id)
        finally:
            await turn.aclose()

    assert hold.asked.is_set()
    assert ended_at - start == pytest.approx(DEADLINE_MS / 1000)  # at the deadline, not before, not later
    started, shown, final, ended = [e for e in events if not isinstance(e, UsageReported)]
    assert isinstance(started, ToolCallStarted) and (started.call_id, started.kind) == ("w1", "edit")  # streaming
    assert isinstance(shown, ToolCallUpdated) and (shown.status, shown.title) == (None, "Write new.txt")  # read
    assert final == ToolCallUpdated("w1", "failed", content=(TextContent("Cancelled"),))
    assert isinstance(ended, PromptEnded) and ended.error is caught.value
    assert runner.late == []  # nothing was sent after the prompt's end
    assert not (tmp_path / "new.txt").exists()
    assert len(model.requests) == 1
    assert snapshot is not None
    answer = snapshot.messages[-1]
    assert (answer.outcome, answer.stop_reason) == ("cancelled", "cancelled")
    assert [(c.call_id, c.status) for step in answer.steps for c in step.calls] == [("w1", "failed")]
