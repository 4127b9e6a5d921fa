"""The mode wins over a pending answer: a switch that stops offering a call's tool while the call waits — for the
user's answer, or only to be announced — refuses it, "always" rules notwithstanding; the request is withdrawn at the
switch (the turn goes on without its answer) and an answer taken after it is a rejection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import pytest

from acp_server.domain import ToolCallStarted, ToolCallUpdated, TurnEvent
from acp_server.provider.offline import Answer, LoopbackModel, ToolCalls
from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES, PermissionChoice
from acp_server.turn import ModelSettings, ModelTurn
from acp_server.turn._mode_watch import WITHDRAWN

from ._tools_support import Editor, Events, Hold, LoopSession, text_prompt, tool_messages
from .test_tool_loop import GUARD_S, run_turn, write

pytestmark = pytest.mark.anyio


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return tmp_path


async def test_a_switch_to_read_only_withdraws_the_pending_request_and_refuses_the_rest_of_the_step(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(
        ToolCalls((write("one.new", "w1"), write("two.new", "w2"))),
        ToolCalls((write("three.new", "w3"),)),
        Answer(text="ok"),
    )
    hold = Hold("allow_always")
    editor = Editor(hold)
    session = LoopSession(str(project))
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(run_turn, model, session, client=editor))
        with anyio.fail_after(GUARD_S):
            await hold.asked.wait()
        session.mode = "read-only"  # withdraws the request at once: the turn goes on without its answer
    assert not hold.release.is_set()  # the turn ended without the user's "always allow" (never read)

    outputs = dict(tool_messages(model.requests[1].messages))
    assert not (project / "one.new").exists()
    assert outputs["w1"] == WITHDRAWN.format(name="write_file", mode="read-only")
    assert session.permission_rules == {}
    # The next call of the same step is refused: nothing may change now.
    assert not (project / "two.new").exists()
    assert "not available" in outputs["w2"]
    assert model.requests[1].tool_names == [n for n in TOOL_NAMES if n in READ_ONLY_TOOLS]
    assert not (project / "three.new").exists()
    assert [c.call_id for c in editor.asked] == ["w1"]


class SwitchesThenAllows(Editor):
    """An editor whose user allows at the very moment the session is switched to read-only (the answer is taken
    after the switch, with no chance to withdraw the request first)."""

    def __init__(self, session: LoopSession) -> None:
        super().__init__()
        self.session = session

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        self.asked.append(call)
        self.session.mode = "read-only"
        return "allow_always"


async def test_an_allow_taken_after_a_switch_to_read_only_is_a_rejection(model: LoopbackModel, project: Path) -> None:
    model.enqueue(ToolCalls((write("one.new", "w1"),)), Answer(text="ok"))
    session = LoopSession(str(project))
    editor = SwitchesThenAllows(session)
    _, emit = await run_turn(model, session, client=editor)

    assert [c.call_id for c in editor.asked] == ["w1"]
    assert not (project / "one.new").exists()
    assert emit.final("w1").status == "failed"
    told = dict(tool_messages(model.requests[1].messages))["w1"]
    assert told == WITHDRAWN.format(name="write_file", mode="read-only")
    assert session.permission_rules == {}  # the "always" is not remembered


class SwitchesWhenAnnounced(Events):
    """The editor's reader: the user switches to read-only as the prepared call is announced (its title known,
    before anything is asked; a call shown while it streamed is announced by an update)."""

    async def __call__(self, event: TurnEvent) -> None:
        await super().__call__(event)
        if isinstance(event, ToolCallStarted | ToolCallUpdated) and event.title not in (None, "Write"):  # prepared
            self.session.mode = "read-only"


async def test_a_switch_before_the_decision_refuses_a_call_an_always_rule_would_have_let_run(
    model: LoopbackModel, project: Path
) -> None:
    model.enqueue(ToolCalls((write("one.new", "w1"),)), Answer(text="ok"))
    session = LoopSession(str(project))
    session.permission_rules["edit"] = True  # "always allow" edits, said earlier
    editor = Editor()  # any request fails the test
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m"))
    emit = SwitchesWhenAnnounced(session)
    try:
        with anyio.fail_after(GUARD_S):
            await runner(session, text_prompt("go"), emit, editor.tool_client)
    finally:
        await runner.aclose()
    assert not (project / "one.new").exists()
    assert emit.final("w1").status == "failed"
    told = dict(tool_messages(model.requests[1].messages))["w1"]
    assert told == WITHDRAWN.format(name="write_file", mode="read-only")
