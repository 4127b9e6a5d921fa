"""Fakes for the tool-loop tests: a recording session with a mode and "always" rules, an emit recorder, and an
editor that only answers permission requests (its ``ToolClient`` has no reader, writer or terminal, so the tools
run locally on the test's real files)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio

from acp_server.domain import (
    Conversation,
    Message,
    ModelStep,
    Prompt,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
)
from acp_server.tools import PermissionChoice, ToolClient


def text_prompt(text: str) -> Prompt:
    return Prompt((TextPart(text),))


class LoopSession:
    """A ``SessionLike`` that records its journal calls (and, through :class:`Events`, the events) in order."""

    def __init__(self, cwd: str, mode: str = "default", history: list[Message] | None = None) -> None:
        self.cwd = cwd
        self._mode = mode
        self._switched = anyio.Event()
        self.model: str | None = None  # the server default
        self.permission_rules: dict[str, bool] = {}
        self.conversation = Conversation(list(history or []))
        self.calls: list[tuple[str, Any]] = []

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:  # as the bridge's session: a change wakes who waits for one
        if mode != self._mode:
            self._mode = mode
            switched, self._switched = self._switched, anyio.Event()
            switched.set()

    async def mode_switched(self) -> None:
        await self._switched.wait()

    async def begin_turn(self, prompt: Prompt, user: Message, /) -> Conversation:
        self.calls.append(("begin", user))
        history = Conversation(list(self.conversation.messages))
        self.conversation.messages.append(user)
        return history

    async def record_steps(self, steps: tuple[ModelStep, ...], /) -> None:
        self.calls.append(("steps", steps))

    async def end_turn(self, answer: Message, /) -> None:
        self.calls.append(("end", answer))
        self.conversation.messages.append(answer)

    @property
    def recorded_steps(self) -> list[tuple[ModelStep, ...]]:
        return [value for kind, value in self.calls if kind == "steps"]

    @property
    def answer(self) -> Message:
        ends = [value for kind, value in self.calls if kind == "end"]
        assert len(ends) == 1, self.calls
        return ends[0]  # type: ignore[no-any-return]


class Events:
    """The turn's ``emit``: records the events, also into the session's log."""

    def __init__(self, session: LoopSession) -> None:
        self.session = session
        self.events: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)
        self.session.calls.append(("emit", event))

    def of(self, call_id: str) -> list[TurnEvent]:
        return [e for e in self.events if isinstance(e, ToolCallStarted | ToolCallUpdated) and e.call_id == call_id]

    def final(self, call_id: str) -> ToolCallUpdated:
        finals = [e for e in self.of(call_id) if isinstance(e, ToolCallUpdated) and e.status in ("completed", "failed")]
        assert len(finals) == 1, self.of(call_id)
        return finals[0]

    def started_ids(self) -> list[str]:
        return [e.call_id for e in self.events if isinstance(e, ToolCallStarted)]


@dataclass
class Hold:
    """A permission answer given only once the test sets ``release`` (``asked`` is set when the request comes)."""

    choice: PermissionChoice = "allow_once"
    asked: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)


class Editor:
    """A ``PermissionAsker`` answering from a script (a choice, an exception to raise, a :class:`Hold`); a request
    beyond the script fails the test. Its :attr:`tool_client` has no other part."""

    def __init__(self, *answers: PermissionChoice | BaseException | Hold) -> None:
        self.answers = list(answers)
        self.asked: list[ToolCallStarted] = []
        self.tool_client = ToolClient(self)

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        self.asked.append(call)
        assert self.answers, f"unexpected permission request for {call}"
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Hold):
            answer.asked.set()
            await answer.release.wait()
            return answer.choice
        return answer


def tool_messages(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(tool_call_id, content)`` of the ``tool`` messages, in order."""
    return [(m["tool_call_id"], m["content"]) for m in messages if m.get("role") == "tool"]


def sse_tool_chunk(index: int, *, call_id: str | None = None, name: str | None = None, arguments: str = "") -> str:
    """One raw SSE chunk carrying one tool-call fragment (``call_id`` None: no ``id`` key at all)."""
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        fragment["id"] = call_id
    if name is not None:
        fragment["type"] = "function"
        fragment["function"]["name"] = name
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n"


def sse_finish(reason: str) -> str:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': {}, 'finish_reason': reason}]})}\n\n"
