"""Tool calls on the wire: live ``tool_call`` / ``tool_call_update`` updates and replayed tool steps are exactly what
the official ``acp.schema.SessionNotification`` model dumps (see ``test_convert.py`` for the text kinds)."""

from __future__ import annotations

from typing import Any

import pytest
from acp import schema
from pydantic import BaseModel

from acp_server.acp import replay_updates, update_from_event
from acp_server.domain import (
    DiffContent,
    ModelStep,
    TerminalContent,
    TextContent,
    ToolCallRecord,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolLocation,
)
from acp_server.store import StoredMessage
from tests.acp_wire_schema import validate_update

from .test_convert import SID, dumps


def official_content(content: ToolContent) -> Any:
    if isinstance(content, TextContent):
        return schema.ContentToolCallContent(
            type="content", content=schema.TextContentBlock(type="text", text=content.text)
        )
    if isinstance(content, DiffContent):
        return schema.FileEditToolCallContent(
            type="diff", path=content.path, old_text=content.old_text, new_text=content.new_text
        )
    return schema.TerminalToolCallContent(type="terminal", terminal_id=content.terminal_id)


def official_locations(locations: tuple[ToolLocation, ...]) -> list[schema.ToolCallLocation] | None:
    return [schema.ToolCallLocation(path=loc.path, line=loc.line) for loc in locations] or None


def with_null_old_text(params: dict[str, Any]) -> dict[str, Any]:
    """The official dump with the one field we send although it is None: a new file's ``"oldText": null``."""
    content = params["update"].get("content")
    for item in content if isinstance(content, list) else ():
        if item.get("type") == "diff":
            item.setdefault("oldText", None)
    return params


def notification(update: BaseModel) -> dict[str, Any]:
    return with_null_old_text(dumps(schema.SessionNotification(session_id=SID, update=update)))  # type: ignore[arg-type]


def round_trip(params: dict[str, Any]) -> dict[str, Any]:
    return with_null_old_text(dumps(schema.SessionNotification.model_validate(params)))


def test_a_new_files_diff_says_old_text_null_explicitly() -> None:
    params = update_from_event(SID, ToolCallStarted("c1", "Write new.py", "edit", content=(ALL_CONTENT[2],)))
    new_file = {"type": "diff", "path": "/p/new.py", "oldText": None, "newText": "created\n"}
    assert params["update"]["content"] == [new_file]
    assert round_trip(params) == params


ALL_CONTENT: tuple[ToolContent, ...] = (
    TextContent("output\n"),
    DiffContent("/p/a.py", "old\n", "new\n"),
    DiffContent("/p/new.py", None, "created\n"),  # a new file has no old text
    TerminalContent("term-1"),
)

STARTED = [
    ToolCallStarted("c1", "Read a.py", "read"),
    ToolCallStarted(
        "c2", "Edit a.py", "edit", {"path": "a.py", "n": [1, None]}, (ToolLocation("/p/a.py", 7),), ALL_CONTENT
    ),
    ToolCallStarted("c3", "Run tests", "execute", {}, (ToolLocation("/p"), ToolLocation("/p/b.py", 1))),
    ToolCallStarted("c4", "Unknown tool", "other", None),  # arguments that were not JSON: no rawInput
]


@pytest.mark.parametrize("event", STARTED, ids=lambda e: e.call_id)
def test_a_started_call_is_a_tool_call_update_of_the_official_model(event: ToolCallStarted) -> None:
    official = schema.ToolCallStart(
        session_update="tool_call",
        tool_call_id=event.call_id,
        title=event.title,
        kind=event.kind,
        status="pending",
        raw_input=event.raw_input,
        locations=official_locations(event.locations),
        content=[official_content(c) for c in event.content] or None,
    )
    params = update_from_event(SID, event)
    assert params == notification(official)
    assert round_trip(params) == params


UPDATED = [
    ToolCallUpdated("c1", "in_progress"),
    ToolCallUpdated("c1", content=(TerminalContent("term-1"),)),
    ToolCallUpdated("c1", "completed", content=ALL_CONTENT, raw_output={"exitCode": 0, "truncated": False}),
    ToolCallUpdated("c1", "failed", content=(TextContent("Cancelled"),)),
    ToolCallUpdated("c1", title="Read b.py", locations=(ToolLocation("/p/b.py", 3),)),
    ToolCallUpdated("c1", "completed", content=()),
    ToolCallUpdated("c1", raw_input={"path": "a.py", "content": "par"}, locations=(ToolLocation("/p/a.py"),)),
    ToolCallUpdated("c1", title="Read a.py", kind="read", raw_input={"path": "a.py"}, content=()),
    ToolCallUpdated("c1", "failed", title="Read (invalid arguments)", kind="read", content=(TextContent("bad"),)),
]


@pytest.mark.parametrize("event", UPDATED, ids=repr)
def test_an_updated_call_is_a_tool_call_progress_of_the_official_model(event: ToolCallUpdated) -> None:
    official = schema.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=event.call_id,
        status=event.status,
        title=event.title,
        content=None if event.content is None else [official_content(c) for c in event.content],
        locations=None if event.locations is None else official_locations(event.locations) or [],
        raw_output=event.raw_output,
        kind=event.kind,
        raw_input=event.raw_input,
    )
    params = update_from_event(SID, event)
    assert params == notification(official)
    assert round_trip(params) == params


READ = ToolCallRecord(
    "r1",
    "read_file",
    '{"path": "a.py"}',
    "     1\tx\n",
    "completed",
    "Read a.py",
    "read",
    (ToolLocation("/p/a.py"),),
    (TextContent("     1\tx\n"),),
)
EDIT = ToolCallRecord(
    "e1",
    "edit_file",
    '{"path": "a.py"}',
    "Edited a.py",
    "completed",
    "Edit a.py",
    "edit",
    (ToolLocation("/p/a.py", 2),),
    (DiffContent("/p/a.py", "x\n", "y\n"),),
)
RUN = ToolCallRecord(
    "x1",
    "run_command",
    '{"command": "make"}',
    "exit status 2\nboom",
    "completed",
    "Run make",
    "execute",
    (),
    (TerminalContent("term-9"),),
    {"exitCode": 2},
)
BAD = ToolCallRecord("b1", "nope", "{not json", "Error: unknown tool 'nope'", "failed", "nope", "other")


def start_of(record: ToolCallRecord, raw_input: Any) -> dict[str, Any]:
    """The replayed ``tool_call``: what the official model dumps, with the tool's ``name`` (ACP 1.25; newer than
    the Python SDK's model)."""
    params = notification(
        schema.ToolCallStart(
            session_update="tool_call",
            tool_call_id=record.call_id,
            title=record.title,
            kind=record.kind,
            status="pending",
            raw_input=raw_input,
            locations=official_locations(record.locations),
        )
    )
    update = params["update"]
    params["update"] = {**{k: v for k, v in update.items() if k != "status"}, "name": record.name, "status": "pending"}
    return params


def end_of(record: ToolCallRecord, content: list[Any] | None) -> dict[str, Any]:
    return notification(
        schema.ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=record.call_id,
            status=record.status,
            content=content,
            raw_output=record.raw_output,
        )
    )


def chunk(kind: str, text: str, seq: int, meta: dict[str, Any] | None = None, step: int = 0) -> dict[str, Any]:
    cls: Any = schema.AgentMessageChunk if kind == "agent_message_chunk" else schema.AgentThoughtChunk
    return notification(
        cls(
            session_update=kind,
            content=schema.TextContentBlock(type="text", text=text),
            message_id=f"{SID}/{seq}.{step}" + (".thought" if kind == "agent_thought_chunk" else ""),
            field_meta=meta,
        )
    )


def test_replayed_steps_are_their_chunks_then_each_call_as_announced_and_as_it_ended() -> None:
    cancelled = {"acpServer": {"outcome": "cancelled", "stopReason": "cancelled"}}
    history = [
        StoredMessage(
            2,
            "assistant",
            "All done.",
            reasoning="final thought",
            stop_reason="end_turn",
            steps=(
                ModelStep("Let me look.", "step thought", (READ, BAD)),
                ModelStep("", "", (EDIT, RUN)),
            ),
        ),
        StoredMessage(
            4, "assistant", "", stop_reason="cancelled", outcome="cancelled", steps=(ModelStep("Again.", "", (READ,)),)
        ),
    ]
    text = schema.TextContentBlock(type="text", text="exit status 2\nboom")
    expected = [
        chunk("agent_thought_chunk", "step thought", 2),
        chunk("agent_message_chunk", "Let me look.", 2),
        start_of(READ, {"path": "a.py"}),
        end_of(READ, [official_content(TextContent("     1\tx\n"))]),
        start_of(BAD, None),  # not JSON: no rawInput
        end_of(BAD, None),
        start_of(EDIT, {"path": "a.py"}),
        end_of(EDIT, [official_content(EDIT.content[0])]),
        start_of(RUN, {"command": "make"}),
        # The terminal is gone once replayed: what the model got stands in for it.
        end_of(RUN, [schema.ContentToolCallContent(type="content", content=text)]),
        chunk("agent_thought_chunk", "final thought", 2, step=2),
        chunk("agent_message_chunk", "All done.", 2, step=2),
        chunk("agent_message_chunk", "Again.", 4, cancelled),
        start_of(READ, {"path": "a.py"}),
        end_of(READ, [official_content(TextContent("     1\tx\n"))]),
        chunk("agent_message_chunk", "", 4, cancelled, step=1),  # the mark is never lost
    ]
    replayed = list(replay_updates(SID, history))
    assert replayed == expected
    for params in replayed:
        validate_update(params)
        if params["update"]["sessionUpdate"] != "tool_call":
            assert round_trip(params) == params
