"""Tool calls shown while the model streams them: announced as soon as the name arrives, updated (at most four times
a second of the turn's clock) as the arguments arrive, then the usual sequence; a call that never runs still ends.
The real SDK over the loopback model, the real tools on ``tmp_path``, trio's virtual clock."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.domain import DiffContent, TextContent, ToolCallStarted, ToolCallUpdated, ToolLocation, TurnEvent
from acp_server.pipeline import ModelTransportError, StreamPolicy
from acp_server.provider.offline import Answer, LoopbackModel, PartialToolCalls, ScriptedCall, ToolCalls
from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES
from acp_server.turn import ModelSettings, ModelTurn
from acp_server.turn._calls import run_call

from ._tools_support import Editor, Events, LoopSession, text_prompt

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    pytest.mark.virtual_time(autojump=0.05),
]

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
READ_ONLY_TOOLS_OFFERED = tuple(name for name in TOOL_NAMES if name in READ_ONLY_TOOLS)
CONTENT = "".join(f"line {n} of the new notes\n" for n in range(12))  # 276 characters


class Timed(Events):
    """The turn's ``emit``, with the turn's clock at each event."""

    def __init__(self, session: LoopSession) -> None:
        super().__init__(session)
        self.times: list[float] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.times.append(anyio.current_time())
        await super().__call__(event)


async def _turn(model: LoopbackModel, session: LoopSession, emit: Events, client: Editor | None = None) -> str:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    try:
        return await runner(session, text_prompt("write the notes"), emit, client and client.tool_client)
    finally:
        await runner.aclose()


async def test_a_slowly_streamed_call_is_shown_from_its_name_on_and_updated_at_most_four_times_a_second(
    tmp_path: Path,
) -> None:
    write = ScriptedCall("write_file", {"path": "notes.txt", "content": CONTENT}, id="w1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((write,), fragment_size=8, fragment_delay_s=0.1), Answer(text="written"))
        session = LoopSession(str(tmp_path))
        emit = Timed(session)
        stop = await _turn(model, session, emit, Editor("allow_once"))
        first, second = model.requests
    assert stop == "end_turn" and (tmp_path / "notes.txt").read_text() == CONTENT
    events = [(t, e) for t, e in zip(emit.times, emit.events, strict=True) if getattr(e, "call_id", None) == "w1"]
    (shown_at, started), *streaming = events
    assert started == ToolCallStarted("w1", "Write", "edit", name="write_file")  # pending, from the name alone
    assert shown_at - first.received_at < 0.5  # about 3.7 s before the last fragment
    progress = [(t, e) for t, e in streaming if isinstance(e, ToolCallUpdated) and e.title is e.status is None]
    assert 8 <= len(progress) <= 16  # 37 fragments over 3.7 s: a few a second, not one per fragment
    times = [shown_at, *(t for t, _ in progress)]
    assert all(later - earlier >= 0.25 for earlier, later in pairwise(times))
    inputs = [e.raw_input for _, e in progress]
    assert all(isinstance(i, dict) and i.get("path", "notes.txt").startswith(i.get("path", "")) for i in inputs)
    contents = [i["content"] for i in inputs if isinstance(i, dict) and "content" in i]
    assert contents and all(CONTENT.startswith(c) for c in contents) and contents == sorted(contents, key=len)
    located = [e.locations for _, e in progress if e.locations is not None]
    assert located == [(ToolLocation(str(tmp_path / "notes.txt")),)]  # once, as soon as the path was complete
    # then the usual sequence: what the call is, once read (an update of the card), asked, run, ended
    rest = [e for _, e in streaming if not (isinstance(e, ToolCallUpdated) and e.title is None and e.status is None)]
    read, running, done = rest
    assert isinstance(read, ToolCallUpdated) and read.status is None
    assert (read.title, read.kind) == ("Write notes.txt", "edit")
    assert read.raw_input == {"path": "notes.txt", "content": CONTENT}
    assert read.content == (DiffContent(str(tmp_path / "notes.txt"), None, CONTENT),)
    assert (running.status, done.status) == ("in_progress", "completed")  # type: ignore[union-attr]
    assert second.messages[-2]["tool_calls"][0]["id"] == "w1"  # the id it was shown with is the one sent back


async def test_a_call_shown_while_streaming_that_never_runs_still_ends_failed(tmp_path: Path) -> None:
    read = ScriptedCall("read_file", {"path": "a.txt"}, id="r1")
    async with LoopbackModel() as model:
        model.enqueue(PartialToolCalls((read,), fragments=2, then="end"))  # cut after the call began: not retried
        session = LoopSession(str(tmp_path))
        emit = Events(session)
        with pytest.raises(ModelTransportError):
            await _turn(model, session, emit)
    started, *_, final = emit.of("r1")
    assert started == ToolCallStarted("r1", "Read", "read", name="read_file")
    note = TextContent("Not run: the turn ended before this call could run")
    assert final == ToolCallUpdated("r1", "failed", content=(note,))
    assert session.answer.outcome == "failed" and session.answer.steps == ()


async def test_a_cancel_while_a_call_streams_ends_it_failed_before_the_turn_unwinds(tmp_path: Path) -> None:
    write = ScriptedCall("write_file", {"path": "notes.txt", "content": CONTENT}, id="w1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((write,), fragment_size=8, fragment_delay_s=0.1))
        session = LoopSession(str(tmp_path))
        emit = Events(session)
        with anyio.move_on_after(1):
            await _turn(model, session, emit)
    started, *_, final = emit.of("w1")
    assert isinstance(started, ToolCallStarted)
    assert final == ToolCallUpdated("w1", "failed", content=(TextContent("Cancelled before it ran"),))
    assert session.answer.outcome == "cancelled"
    assert not (tmp_path / "notes.txt").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "title", "kind"),
    [
        ("read_file", {"paht": "a.txt"}, "Read — unknown argument paht", "read"),
        ("read_file", {}, "Read — missing path", "read"),
        ("list_directory", {"path": "src/x"}, "List src/x — no such path", "read"),
        ("run_command", "{not json", "Run — arguments not JSON", "execute"),
        (
            "edit_file",
            {"path": "../outside", "old_text": "a", "new_text": "b"},
            "Edit ../outside — outside the project",
            "edit",
        ),
        ("fetch_url", {}, "Unknown tool fetch_url", "other"),
    ],
)
async def test_a_call_that_fails_before_running_keeps_its_tools_kind_and_a_human_title(
    tmp_path: Path, name: str, arguments: Any, title: str, kind: str
) -> None:
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall(name, arguments, id="c1"),)), Answer(text="ok"))
        session = LoopSession(str(tmp_path))
        emit = Events(session)
        assert await _turn(model, session, emit) == "end_turn"
    started, final = emit.of("c1")
    assert isinstance(started, ToolCallStarted) and started.kind == kind
    assert isinstance(final, ToolCallUpdated) and (final.status, final.title, final.kind) == ("failed", title, kind)
    [record] = session.answer.steps[0].calls
    assert (record.title, record.kind, record.status) == (title, kind, "failed")  # what a reload shows


async def test_a_call_not_shown_while_streaming_that_fails_is_announced_with_its_kind_and_human_title(
    tmp_path: Path,
) -> None:
    events: list[TurnEvent] = []
    records: list[Any] = []

    async def emit(event: TurnEvent) -> None:
        events.append(event)

    for name in ("read_file", "run_command"):
        await run_call(
            f"c-{name}",
            name,
            '{"paht": 1}',
            cwd=str(tmp_path),
            mode="read-only",
            offered=READ_ONLY_TOOLS_OFFERED,
            rules={},
            client=None,
            emit=emit,
            done=records.append,
        )
    shown = [(e.title, e.kind) for e in events if isinstance(e, ToolCallStarted)]
    assert shown == [("Read — unknown argument paht", "read"), ("Run — not offered in this mode", "execute")]
    assert [(r.title, r.kind, r.status) for r in records] == [
        ("Read — unknown argument paht", "read", "failed"),
        ("Run — not offered in this mode", "execute", "failed"),
    ]


def test_a_streamed_path_in_an_additional_directory_is_located_too() -> None:
    from acp_server.turn._announce import _location

    arguments = b'{"path": "/work/extra/a.txt", "content": "x'
    assert _location(arguments, "/work/project", ("/work/extra",)) == ToolLocation("/work/extra/a.txt")
    assert _location(arguments, "/work/project") is None  # not a root of this session: not shown
    assert _location(b'{"path": "/work/other/a.txt"', "/work/project", ("/work/extra",)) is None
    relative = _location(b'{"path": "sub/a.txt"', "/work/project", ("/work/extra",))
    assert relative == ToolLocation("/work/project/sub/a.txt")
