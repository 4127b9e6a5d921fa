"""Values the store reads and writes, and the pure codecs both stores share (no SQL here).

Invariants of a stored session's history:
- messages are numbered ``seq`` = 1, 2, 3 … without gaps, in the order they were accepted;
- a turn owns two consecutive numbers, reserved in one transaction when it starts: the user's prompt (``n``) and
  its answer (``n + 1``), so turns of two processes never interleave;
- an answer is ``pending`` from then until its turn ends; it is then rewritten once with what was streamed, its stop
  reason and outcome (``complete``, ``failed``, ``cancelled``). A pending answer whose process is gone reads as
  ``interrupted``; one whose process is alive reads as ``running``;
- a compaction (a summary of messages ``1..k``, what the model sees instead of them) is a record beside the
  history, never a change to it: the messages stay as they were, and the latest compaction is read with them;
- a turn's tool loop lives inside its answer (``steps``: its tool-calling model requests, in order), so the two
  numbers above stay the whole turn. While the answer is pending its steps are rewritten after each tool call ends
  (a pending or interrupted answer reads with the steps recorded so far); ending the turn writes the final ones.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, cast, get_args

from ..domain import (
    Compaction,
    ContextUsage,
    DiffContent,
    ImageContent,
    ImagePart,
    Message,
    ModelStep,
    Outcome,
    PlanEntry,
    PlanPriority,
    PlanStatus,
    PromptPart,
    ResourceLinkPart,
    ResourcePart,
    StopReason,
    TerminalContent,
    TextContent,
    TextPart,
    ToolCallRecord,
    ToolContent,
    ToolKind,
    ToolLocation,
)
from ..system_prompts import ClientPrompt
from ._exceptions import InvalidCursorError

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "Rewind",
    "SessionPage",
    "SessionRecord",
    "SessionSnapshot",
    "StoredMessage",
    "TurnTicket",
    "cwd_key",
    "directories_from_json",
    "directories_to_json",
]

DEFAULT_PAGE_SIZE = 50

FinalOutcome: TypeAlias = Literal["complete", "failed", "cancelled"]
"""What a turn may record when it ends."""


def cwd_key(cwd: str) -> str:
    """What ``list_sessions(cwd=...)`` compares: the path normalised (``/a/b/``, ``/a//b``, ``/a/./b`` are
    ``/a/b``). Stored paths stay as given; only the comparison uses this."""
    key = os.path.normpath(cwd)
    return "/" + key.lstrip("/") if key.startswith("//") else key


def directories_to_json(directories: tuple[str, ...]) -> str | None:
    """How a session's additional directories are stored: a JSON array of strings, NULL for none."""
    return json.dumps(list(directories)) if directories else None


def directories_from_json(text: str | None) -> tuple[str, ...]:
    """The additional directories of a stored column (NULL, or anything that is not an array of strings: none)."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return ()
    return tuple(value)


def now_us() -> int:
    """Wall-clock microseconds since the epoch: the unit of every stored timestamp."""
    return time.time_ns() // 1000


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One stored session. ``title`` is the first line of its first prompt ('' until then) unless set since;
    ``mode`` / ``model`` the session's mode id / model name as last set (None: never set, the server's default
    applies); ``additional_directories`` the session's further roots (ACP ``additionalDirectories``), in order, as
    last activated (``()``: none); ``system_prompt`` the client's own system prompt (ACP ``systemPrompt``), as
    last given (None: none); ``task_of`` the session whose ``task`` call ran this one (a subagent child, listed
    only under it and deleted with it; None: a session of its own)."""

    session_id: str
    cwd: str
    title: str
    created_us: int
    updated_us: int
    mode: str | None = None
    model: str | None = None
    additional_directories: tuple[str, ...] = ()
    system_prompt: ClientPrompt | None = None
    task_of: str | None = None

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.created_us / 1_000_000, UTC)

    @property
    def updated_at(self) -> datetime:
        return datetime.fromtimestamp(self.updated_us / 1_000_000, UTC)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message as stored. ``content`` is what the model sees; ``parts`` is the prompt as sent (user only);
    ``steps`` the answer's tool-calling model requests before its ``content``, ``usage`` the size of its last
    request (assistant only)."""

    seq: int
    role: Literal["user", "assistant"]
    content: str
    reasoning: str = ""
    parts: tuple[PromptPart, ...] = ()
    stop_reason: StopReason | None = None
    outcome: Outcome = "complete"
    steps: tuple[ModelStep, ...] = ()
    usage: ContextUsage | None = field(default=None, compare=False)  # a measurement: equality ignores it

    @property
    def final(self) -> bool:
        """Will never change again (everything but a ``running`` answer)."""
        return self.outcome != "running"

    def to_message(self) -> Message:
        return Message(self.role, self.content, self.reasoning, self.stop_reason, self.outcome, self.steps, self.usage)


@dataclass(frozen=True, slots=True)
class Rewind:
    """A rewind of the conversation (``/rewind``): messages ``start..through`` (``start`` a prompt's) are out of
    what the model sees from then on; they stay stored, as they were."""

    start: int
    through: int

    def covers(self, seq: int) -> bool:
        return self.start <= seq <= self.through


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A session and its whole history, read in one transaction, with its latest compaction (None: none) and its
    rewinds (oldest first)."""

    record: SessionRecord
    messages: tuple[StoredMessage, ...]
    compaction: Compaction | None = None
    rewinds: tuple[Rewind, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of ``list_sessions``, newest first; ``next_cursor`` is None on the last page."""

    sessions: tuple[SessionRecord, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class TurnTicket:
    """A started turn: its two reserved numbers, and the stored messages its caller had not seen yet.

    ``catch_up`` holds every stored message with ``seq > since`` that precedes the prompt, so the caller's copy of
    the history, cut after ``since`` messages and extended with ``catch_up``, equals the stored one before the model
    is asked. ``since`` is the ``known`` given to ``begin_turn`` unless the store holds fewer messages than that
    (the file was replaced): then it is 0 and ``catch_up`` is the whole history. ``title`` is the session's title
    as the same transaction left it, ``compaction`` its latest compaction.
    """

    session_id: str
    user_seq: int
    answer_seq: int
    catch_up: tuple[StoredMessage, ...]
    since: int = 0
    title: str = ""
    compaction: Compaction | None = None


# -- cursors -------------------------------------------------------------------------------------------------


def encode_cursor(record: SessionRecord) -> str:
    """An opaque keyset cursor: the sort key of the last session of a page."""
    raw = json.dumps(["v1", record.updated_us, record.session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(updated_us, session_id)`` of a cursor from :func:`encode_cursor`; anything else is invalid params."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        tag, updated_us, session_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise InvalidCursorError() from None
    if tag != "v1" or type(updated_us) is not int or not isinstance(session_id, str):
        raise InvalidCursorError()
    if not 0 <= updated_us < 2**63 or not session_id.isascii():  # what SQLite and our ids can hold
        raise InvalidCursorError()
    return updated_us, session_id


# -- prompt parts --------------------------------------------------------------------------------------------


def parts_to_json(parts: tuple[PromptPart, ...]) -> str:
    """The prompt as sent, for replay (images included: a replay shows what the user sent)."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ResourceLinkPart):
            out.append({"type": "resource_link", "uri": part.uri, "name": part.name, "description": part.description})
        elif isinstance(part, ResourcePart):
            out.append({"type": "resource", "uri": part.uri, "text": part.text, "mimeType": part.mime_type})
        else:
            out.append({"type": "image", "data": part.data, "mimeType": part.mime_type})
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def parts_from_json(text: str | None) -> tuple[PromptPart, ...]:
    if not text:
        return ()
    parts: list[PromptPart] = []
    for item in json.loads(text):
        kind = item.get("type")
        if kind == "text":
            parts.append(TextPart(item["text"]))
        elif kind == "resource_link":
            parts.append(ResourceLinkPart(item["uri"], item["name"], item.get("description")))
        elif kind == "resource":
            parts.append(ResourcePart(item["uri"], item.get("text"), item.get("mimeType")))
        elif kind == "image":
            parts.append(ImagePart(item["data"], item["mimeType"]))
    return tuple(parts)


# -- context usage -------------------------------------------------------------------------------------------


def usage_to_json(usage: ContextUsage | None) -> str | None:
    return None if usage is None else f"[{int(usage.reported)},{int(usage.estimated)}]"


def usage_from_json(text: str | None) -> ContextUsage | None:
    """The usage :func:`usage_to_json` wrote; anything else (a newer version's shape) reads as unknown."""
    if not text:
        return None
    try:
        reported, estimated = json.loads(text)[:2]
    except (ValueError, TypeError):
        return None
    if type(reported) is not int or type(estimated) is not int or reported < 0 or estimated < 0:
        return None
    return ContextUsage(reported, estimated)


# -- tool steps ----------------------------------------------------------------------------------------------

_TOOL_KINDS: frozenset[str] = frozenset(get_args(ToolKind))
_PLAN_STATUSES: frozenset[object] = frozenset(get_args(PlanStatus))
_PLAN_PRIORITIES: frozenset[object] = frozenset(get_args(PlanPriority))


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _content_to_json(content: ToolContent) -> dict[str, Any]:
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text}
    if isinstance(content, DiffContent):
        return {"type": "diff", "path": content.path, "oldText": content.old_text, "newText": content.new_text}
    if isinstance(content, ImageContent):  # never stored (the turn keeps none): were one given, its note
        return {"type": "text", "text": content.note}
    return {"type": "terminal", "terminalId": content.terminal_id}


def _call_to_json(call: ToolCallRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "output": call.output,
        "status": call.status,
        "title": call.title,
        "kind": call.kind,
    }
    if call.locations:
        out["locations"] = [
            {"path": loc.path} if loc.line is None else {"path": loc.path, "line": loc.line} for loc in call.locations
        ]
    if call.content:
        out["content"] = [_content_to_json(c) for c in call.content]
    if call.raw_output is not None:
        out["rawOutput"] = call.raw_output
    if call.plan is not None:
        out["plan"] = [{"content": e.content, "status": e.status, "priority": e.priority} for e in call.plan]
    return out


def steps_to_json(steps: tuple[ModelStep, ...]) -> str | None:
    """An answer's tool steps as compact JSON; None for none. ``raw_output`` is stored as JSON (a value JSON cannot
    hold is stored as its ``str``: a display field never costs the record of a turn)."""
    if not steps:
        return None
    return _dumps(
        [{"text": s.text, "reasoning": s.reasoning, "calls": [_call_to_json(c) for c in s.calls]} for s in steps]
    )


JournalRow = tuple[int, str | None, str | None]
"""One row of a running answer's call journal: (step index, the step's ``{"text", "reasoning"}`` JSON on the
step's first row else None, the call's JSON or None for a step without calls)."""


def journal_rows(steps: tuple[ModelStep, ...], start: int) -> list[JournalRow]:
    """The journal rows of ``steps`` from row ``start`` on (rows before it are already written: steps only grow —
    earlier steps are final, the last one gains calls). Encodes only what is returned."""
    rows: list[JournalRow] = []
    n = 0
    for index, step in enumerate(steps):
        width = max(1, len(step.calls))
        if n + width <= start:
            n += width
            continue
        for position in range(width):
            if n >= start:
                head = _dumps({"text": step.text, "reasoning": step.reasoning}) if position == 0 else None
                call = _dumps(_call_to_json(step.calls[position])) if step.calls else None
                rows.append((index, head, call))
            n += 1
    return rows


def journal_length(steps: tuple[ModelStep, ...]) -> int:
    """How many journal rows ``steps`` make."""
    return sum(max(1, len(step.calls)) for step in steps)


def steps_json_from_journal(rows: list[JournalRow]) -> str | None:
    """The :func:`steps_to_json` text of the steps a journal holds (rows in order), without decoding a call."""
    if not rows:
        return None
    steps: list[str] = []
    calls: list[str] = []
    head: str | None = None
    current = -1
    for index, row_head, call in rows:
        if index != current:
            if head is not None:
                steps.append(f'{head[:-1]},"calls":[{",".join(calls)}]}}')
            head, calls, current = row_head or '{"text":"","reasoning":""}', [], index
        if call is not None:
            calls.append(call)
    assert head is not None
    steps.append(f'{head[:-1]},"calls":[{",".join(calls)}]}}')
    return f"[{','.join(steps)}]"


def _content_from_json(item: dict[str, Any]) -> ToolContent | None:
    kind = item.get("type")
    if kind == "text":
        return TextContent(item["text"])
    if kind == "diff":
        return DiffContent(item["path"], item.get("oldText"), item["newText"])
    if kind == "terminal":
        return TerminalContent(item["terminalId"])
    return None  # a kind a newer version wrote: skipped


def _call_from_json(item: dict[str, Any]) -> ToolCallRecord:
    kind = item.get("kind")
    tool_kind = cast(ToolKind, kind) if isinstance(kind, str) and kind in _TOOL_KINDS else "other"
    locations = tuple(ToolLocation(loc["path"], loc.get("line")) for loc in item.get("locations", ()))
    contents = (_content_from_json(c) for c in item.get("content", ()))
    return ToolCallRecord(
        call_id=item["id"],
        name=item["name"],
        arguments=item["arguments"],
        output=item["output"],
        status="completed" if item.get("status") == "completed" else "failed",
        title=item.get("title", ""),
        kind=tool_kind,
        locations=locations,
        content=tuple(c for c in contents if c is not None),
        raw_output=item.get("rawOutput"),
        plan=_plan_from_json(item.get("plan")),
    )


def _plan_from_json(items: object) -> tuple[PlanEntry, ...] | None:
    """A stored call's plan; None when it has none. An entry a newer version wrote with values this one does not
    know keeps its text (an unknown status reads ``pending``, an unknown priority ``medium``)."""
    if not isinstance(items, list):
        return None
    plan: list[PlanEntry] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(content := item.get("content"), str):
            continue
        status, priority = item.get("status"), item.get("priority")
        plan.append(
            PlanEntry(
                content,
                cast(PlanStatus, status) if status in _PLAN_STATUSES else "pending",
                cast(PlanPriority, priority) if priority in _PLAN_PRIORITIES else "medium",
            )
        )
    return tuple(plan)


def steps_from_json(text: str | None) -> tuple[ModelStep, ...]:
    """The steps written by :func:`steps_to_json` (None or '' is none); content of an unknown type is skipped."""
    if not text:
        return ()
    return tuple(
        ModelStep(step.get("text", ""), step.get("reasoning", ""), tuple(_call_from_json(c) for c in step["calls"]))
        for step in json.loads(text)
    )
