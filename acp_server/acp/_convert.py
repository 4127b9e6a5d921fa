"""ACP wire content ⇄ domain values (``acp_server.domain``): prompts in, ``session/update`` params out."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any
from uuid import uuid4

from ..domain import (
    Compacted,
    Compacting,
    Compaction,
    CompactionStopped,
    DiffContent,
    ImageContent,
    ImagePart,
    Notice,
    PlanEntry,
    PlanUpdated,
    Prompt,
    PromptPart,
    ResourceLinkPart,
    ResourcePart,
    RetryNotice,
    TerminalContent,
    TextChunk,
    TextContent,
    TextPart,
    ThoughtChunk,
    ToolCallRecord,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolLocation,
    TurnEvent,
    UsageReported,
    answer_message_id,
    compaction_id,
)
from ..errors import InvalidInputError
from ..store import Rewind, StoredMessage

__all__ = [
    "compaction_note",
    "compaction_update",
    "notice_update",
    "plan_id_of",
    "plan_update",
    "prompt_from_blocks",
    "replay_updates",
    "tool_call_fields",
    "update_from_event",
    "usage_update",
    "wire_block",
    "wire_message_id",
]


def prompt_from_blocks(blocks: list[Any]) -> Prompt:
    """Convert validated ``acp.schema`` content blocks; audio is refused (not advertised)."""
    parts: list[PromptPart] = []
    for block in blocks:
        kind = block.type
        if kind == "text":
            parts.append(TextPart(block.text))
        elif kind == "resource_link":
            parts.append(ResourceLinkPart(block.uri, block.name, block.description))
        elif kind == "resource":
            resource = block.resource
            parts.append(ResourcePart(resource.uri, getattr(resource, "text", None), resource.mime_type))
        elif kind == "image":
            parts.append(ImagePart(block.data, block.mime_type))
        else:
            raise InvalidInputError.for_field(
                "prompt",
                f"{kind} content is not supported (see promptCapabilities)",
                f"Invalid params for session/prompt: content type {kind!r} is not supported",
            )
    if not parts:
        raise InvalidInputError.for_field("prompt", "empty", "Invalid params for session/prompt: prompt is empty")
    return Prompt(tuple(parts))


def wire_block(part: PromptPart) -> dict[str, Any]:
    """The wire form of a content block, exactly what the official ``acp.schema`` model dumps (``tests/acp`` pins
    the equality), built directly: updates are sent per streamed chunk and replayed by the thousand."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ResourceLinkPart):
        link: dict[str, Any] = {"type": "resource_link", "uri": part.uri, "name": part.name}
        if part.description is not None:
            link["description"] = part.description
        return link
    if isinstance(part, ResourcePart):
        contents: dict[str, Any] = {"uri": part.uri, "text": part.text or ""}
        if part.mime_type is not None:
            contents["mimeType"] = part.mime_type
        return {"type": "resource", "resource": contents}
    return {"type": "image", "data": part.data, "mimeType": part.mime_type}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _notification(
    session_id: str,
    kind: str,
    content: dict[str, Any],
    message_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``session/update`` params of one content chunk: the one place live and replayed updates are shaped."""
    update: dict[str, Any] = {"content": content}
    if message_id is not None:
        update["messageId"] = message_id
    if meta is not None:
        update["_meta"] = meta
    update["sessionUpdate"] = kind
    return {"sessionId": session_id, "update": update}


def _tool_content(content: ToolContent, *, live: bool = True) -> dict[str, Any]:
    """A tool call content block; a terminal is only live (replayed, it is gone: shown as a note)."""
    if isinstance(content, TextContent):
        return {"type": "content", "content": {"type": "text", "text": content.text}}
    if isinstance(content, DiffContent):
        # "oldText": null said, not left out, for a new file: some clients (Toad) match on the key to show a diff
        return {"type": "diff", "path": content.path, "oldText": content.old_text, "newText": content.new_text}
    if isinstance(content, ImageContent):
        return {"type": "content", "content": {"type": "image", "data": content.data, "mimeType": content.mime_type}}
    if live:
        return {"type": "terminal", "terminalId": content.terminal_id}
    return {"type": "content", "content": {"type": "text", "text": "(ran in the editor's terminal)"}}


def _locations(locations: tuple[ToolLocation, ...]) -> list[dict[str, Any]]:
    return [{"path": loc.path} if loc.line is None else {"path": loc.path, "line": loc.line} for loc in locations]


def tool_call_fields(event: ToolCallStarted) -> dict[str, Any]:
    """The ``ToolCall`` fields of an announced call (``tool_call`` updates and permission requests share them)."""
    fields: dict[str, Any] = {"toolCallId": event.call_id, "title": event.title, "kind": event.kind}
    if event.name:
        fields["name"] = event.name
    fields["status"] = "pending"
    if event.raw_input is not None:
        fields["rawInput"] = event.raw_input
    if event.locations:
        fields["locations"] = _locations(event.locations)
    if event.content:
        fields["content"] = [_tool_content(c) for c in event.content]
    return fields


def _tool_update(session_id: str, update: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": session_id, "update": update}


def _progress(event: ToolCallUpdated) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": event.call_id}
    if event.status is not None:
        update["status"] = event.status
    if event.title is not None:
        update["title"] = event.title
    if event.kind is not None:
        update["kind"] = event.kind
    if event.raw_input is not None:
        update["rawInput"] = event.raw_input
    if event.content is not None:
        update["content"] = [_tool_content(c) for c in event.content]
    if event.locations is not None:
        update["locations"] = _locations(event.locations)
    if event.raw_output is not None:
        update["rawOutput"] = event.raw_output
    return update


def notice_update(event: Notice | RetryNotice) -> dict[str, Any]:
    """The ``notice`` update of a notice (ACP 1.25; only for a client that advertised ``session.notices``)."""
    if isinstance(event, RetryNotice):
        title = event.title or event.text.strip()
        return {"sessionUpdate": "notice", "severity": "warning", "title": title, "description": event.reason}
    update: dict[str, Any] = {"sessionUpdate": "notice", "severity": event.severity, "title": event.title}
    if event.description:
        update["description"] = event.description
    return update


def usage_update(event: UsageReported) -> dict[str, Any]:
    """The ``usage_update`` of one model request: ``used`` tokens, and ``size`` only when the window is known (the
    ACP schema requires it: the ACP face sends no ``usage_update`` without it)."""
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": event.used}
    if event.size is not None:
        update["size"] = event.size
    return update


def plan_update(entries: tuple[PlanEntry, ...], plan_id: str | None = None) -> dict[str, Any]:
    """The ``plan`` update of a whole plan (ACP: every update carries every entry, the client replaces its list);
    with a ``plan_id`` (the client advertised ``plan``: ACP's unstable plan operations) a ``plan_update`` of that
    plan's items, or ``plan_removed`` when the model cleared it."""
    wire = [{"content": e.content, "priority": e.priority, "status": e.status} for e in entries]
    if plan_id is None:
        return {"sessionUpdate": "plan", "entries": wire}
    if not wire:
        return {"sessionUpdate": "plan_removed", "planId": plan_id}
    return {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": plan_id, "entries": wire}}


def plan_id_of(session_id: str) -> str:
    """The session's one plan's id (the model keeps one plan per session)."""
    return f"{session_id}/plan"


_COMPACTING = {
    "threshold": "The conversation is nearing the model's context window: compacting it",
    "refused": "The model refused the request as too long for its context window: compacting the conversation",
    "requested": "Compacting the conversation",
}


def compaction_update(session_id: str, event: Compacting | Compacted | CompactionStopped) -> dict[str, Any]:
    """The ``compaction_update`` of a compaction's start, end or stop (ACP 1.25; only for a client that advertised
    ``session.compaction``): one ``compactionId`` from ``in_progress`` to ``completed`` (with the summary, when
    one was kept), ``failed`` (with ``error``) or ``cancelled``."""
    wire_id = f"{session_id}/{event.compaction_id}"
    update: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": wire_id}
    if isinstance(event, Compacting):
        update["status"] = "in_progress"
    elif isinstance(event, Compacted):
        update["status"] = "completed"
        if event.summary:
            update["summary"] = [_text(event.summary)]
    else:
        update["status"] = event.status
        if event.error:
            update["error"] = event.error
    return {"sessionId": session_id, "update": update}


def compaction_note(event: Compacting | Compacted) -> str:
    """What the user is told of a compaction, as an ``agent_thought_chunk`` (its own paragraph)."""
    if isinstance(event, Compacting):
        window = f" of a {event.size}-token window" if event.size is not None else ""
        return f"{_COMPACTING[event.reason]} (about {event.estimate} tokens{window})…\n\n"
    what = f"messages 1–{event.through} are summarised" if event.through else "older tool outputs are elided"
    return f"Conversation compacted: {what}; about {event.estimate} tokens are sent now.\n\n"


def wire_message_id(session_id: str, local: str) -> str | None:
    """The ``messageId`` of a session-local message id (None: the chunk has none): ``<sessionId>/<local>``."""
    return f"{session_id}/{local}" if local else None


def update_from_event(session_id: str, event: TurnEvent) -> dict[str, Any]:
    """The ``session/update`` params for one live turn event (a compaction: its note, as a thought)."""
    if isinstance(event, TextChunk):
        message_id = wire_message_id(session_id, event.message_id)
        return _notification(session_id, "agent_message_chunk", {"type": "text", "text": event.text}, message_id)
    if isinstance(event, RetryNotice):  # a thought, marked so that a client may show it as a status instead
        retry = {"attempt": event.attempt, "delayMs": event.delay_ms, "reason": event.reason}
        message_id = wire_message_id(session_id, event.message_id)
        return _notification(
            session_id, "agent_thought_chunk", _text(event.text), message_id, {"acpServer": {"retry": retry}}
        )
    if isinstance(event, ThoughtChunk):
        message_id = wire_message_id(session_id, event.message_id)
        return _notification(session_id, "agent_thought_chunk", {"type": "text", "text": event.text}, message_id)
    if isinstance(event, ToolCallStarted):
        return _tool_update(session_id, {"sessionUpdate": "tool_call", **tool_call_fields(event)})
    if isinstance(event, ToolCallUpdated):
        return _tool_update(session_id, _progress(event))
    if isinstance(event, UsageReported):
        return _tool_update(session_id, usage_update(event))
    if isinstance(event, PlanUpdated):
        return _tool_update(session_id, plan_update(event.entries))
    if isinstance(event, Notice):
        return _tool_update(session_id, notice_update(event))
    if isinstance(event, CompactionStopped):  # told as before: the note of a summary thrown away, if any
        note_id = f"{session_id}/{event.compaction_id}"
        return _notification(session_id, "agent_thought_chunk", _text(event.note), note_id)
    if isinstance(event, Compacting | Compacted):
        return _notification(
            session_id, "agent_thought_chunk", _text(compaction_note(event)), f"{session_id}/compaction-{uuid4().hex}"
        )
    return _notification(session_id, "user_message_chunk", wire_block(event.part))


def _replayed_call(session_id: str, call: ToolCallRecord) -> Iterator[dict[str, Any]]:
    """A stored call as one ``tool_call`` (as announced) and its final ``tool_call_update``."""
    start: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": call.call_id, "title": call.title}
    start["kind"] = call.kind
    start["name"] = call.name
    start["status"] = "pending"
    raw_input = _raw_arguments(call.arguments)
    if raw_input is not None:
        start["rawInput"] = raw_input
    if call.locations:
        start["locations"] = _locations(call.locations)
    yield _tool_update(session_id, start)
    end: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call.call_id, "status": call.status}
    if call.content:
        end["content"] = [_tool_content(c, live=False) for c in call.content if not _is_terminal(c)] or [
            _tool_content(TextContent(call.output))
        ]
    if call.raw_output is not None:
        end["rawOutput"] = call.raw_output
    yield _tool_update(session_id, end)


def _is_terminal(content: ToolContent) -> bool:
    return isinstance(content, TerminalContent)


def _raw_arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except ValueError:
        return None


def replay_updates(
    session_id: str,
    messages: Iterable[StoredMessage],
    compaction: Compaction | None = None,
    rewinds: Iterable[Rewind] = (),
    *,
    compaction_updates: bool = False,
    plan_ops: bool = False,
) -> Iterator[dict[str, Any]]:
    """``session/update`` params replaying a stored history, in order: per user message one
    ``user_message_chunk`` per prompt part; per answer, each tool step (its thought and text chunks, then per call
    one ``tool_call`` and its final ``tool_call_update``), then its ``agent_thought_chunk`` and ``agent_message_chunk``.
    The last plan an answer set (its last ``update_plan`` call that completed) is replayed as one ``plan`` update
    right after that call: the plan as that turn left it, not every intermediate one.

    Every chunk carries ``messageId``: ``<sessionId>/<seq>`` for a user message, for an answer's text and thought
    of each request what went out live (:func:`~acp_server.domain.answer_message_id`). An answer that did not
    complete is marked on each of its chunks with ``_meta.acpServer.outcome`` (``failed``, ``cancelled``,
    ``interrupted``, ``running``) and ``stopReason``; an unfinished answer with no text is still replayed, as one
    empty ``agent_message_chunk``, so the mark is never lost. Each value is valid against ACP's schema (a
    ``tool_call``'s ``name`` is newer than the Python SDK's model).

    With a ``compaction``, the history is replayed whole all the same, and one ``agent_thought_chunk`` after message
    ``through`` says what the model sees instead of messages ``1..through`` (``_meta.acpServer.compactedThrough``);
    with ``compaction_updates`` (the client advertised ``session.compaction``) it is that compaction's
    ``compaction_update`` instead, ``completed`` with its summary, under the id it went out with live. With
    ``plan_ops`` (the client advertised ``plan``) plans are ``plan_update`` / ``plan_removed`` of the session's plan.
    Each rewind (``/rewind``) is one ``agent_message_chunk`` after the last message it covers, saying the model no
    longer sees messages ``start..through`` (``_meta.acpServer.rewound``); those messages are replayed all the same.
    """
    by_end = {rewind.through: rewind for rewind in rewinds}
    for message in messages:
        yield from _replayed(session_id, message, plan_id_of(session_id) if plan_ops else None)
        rewind = by_end.get(message.seq)
        if rewind is not None:
            note = (
                f"Rewound: the model no longer sees messages {rewind.start}–{rewind.through} (the turns above from "
                "that prompt on); they stay in the history.\n\n"
            )
            mark: dict[str, Any] = {"acpServer": {"rewound": {"start": rewind.start, "through": rewind.through}}}
            rewind_id = f"{session_id}/{message.seq}.rewind"
            yield _notification(session_id, "agent_message_chunk", _text(note), rewind_id, mark)
        if compaction is not None and message.seq == compaction.through and compaction_updates:
            done = Compacted(compaction.through, 0, compaction_id=compaction_id(compaction.through))
            yield compaction_update(session_id, replace(done, summary=compaction.summary))
        elif compaction is not None and message.seq == compaction.through:
            note = f"Conversation compacted: the model is sent a summary of messages 1–{compaction.through}.\n\n"
            meta = {"acpServer": {"compactedThrough": compaction.through}}
            note_id = f"{session_id}/{message.seq}.compaction"
            yield _notification(session_id, "agent_thought_chunk", _text(note), note_id, meta)


def _replayed(session_id: str, message: StoredMessage, plan_id: str | None = None) -> Iterator[dict[str, Any]]:
    """The updates of one stored message (see :func:`replay_updates`)."""
    if message.role == "user":
        message_id = f"{session_id}/{message.seq}"
        for part in message.parts or (TextPart(message.content),):
            yield _notification(session_id, "user_message_chunk", wire_block(part), message_id)
        return
    meta: dict[str, Any] | None = None
    if message.outcome != "complete":
        mark: dict[str, Any] = {"outcome": message.outcome}
        if message.stop_reason is not None:
            mark["stopReason"] = message.stop_reason
        meta = {"acpServer": mark}
    last_plan = next((c for s in reversed(message.steps) for c in reversed(s.calls) if c.plan is not None), None)
    seq = message.seq
    for index, step in enumerate(message.steps):
        if step.reasoning:
            thought_id = f"{session_id}/{answer_message_id(seq, index, 'thought')}"
            yield _notification(session_id, "agent_thought_chunk", _text(step.reasoning), thought_id, meta)
        if step.text:
            text_id = f"{session_id}/{answer_message_id(seq, index, 'text')}"
            yield _notification(session_id, "agent_message_chunk", _text(step.text), text_id, meta)
        for call in step.calls:
            yield from _replayed_call(session_id, call)
            if call is last_plan and call.plan is not None:
                yield _tool_update(session_id, plan_update(call.plan, plan_id))
    last = len(message.steps)  # the answer's last request: its text is the message's content
    chunks: list[tuple[str, str, str]] = []
    if message.reasoning:
        chunks.append(("agent_thought_chunk", message.reasoning, answer_message_id(seq, last, "thought")))
    if message.content or (not chunks and meta is not None):
        chunks.append(("agent_message_chunk", message.content, answer_message_id(seq, last, "text")))
    for kind, text, local in chunks:
        yield _notification(session_id, kind, {"type": "text", "text": text}, f"{session_id}/{local}", meta)
