"""Subagents: the ``task`` tool's child sessions, run by the turn that called it.

A child has its own conversation (stored as a session linked to its parent when the parent is stored, see
``open_child``; else in memory, for the one call) and context budget, the parent's model, roots and
"always" answers, and a mode no stronger than the parent's (``read-only`` unless the call asks to write, then the
parent's). Its tool calls are its own; a permission request is asked of the parent's client with the child named
in the call's title. It never offers ``task`` itself (no grandchildren). Invariants: a child is bounded in model
requests and time (:class:`SubagentSettings`), is cancelled with the parent's prompt (it runs inside the parent's
call), and what the parent's call shows of it is bounded (the last :data:`PROGRESS_LINES` lines of progress, each
cut); the parent's model gets the child's final answer only.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ..domain import (
    Conversation,
    Message,
    ModelStep,
    Prompt,
    TextChunk,
    TextContent,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
)
from ..modes import READ_ONLY_MODE
from ..tools import ContentSink, PermissionChoice, ToolCallError, ToolClient
from ..tools.builtin import BUILTIN
from ..tools.registry import ToolSet

if TYPE_CHECKING:
    from ..domain import TurnEvent

__all__ = [
    "DEFAULT_TASK_CONCURRENCY",
    "DEFAULT_TASK_MAX_REQUESTS",
    "DEFAULT_TASK_TIMEOUT_S",
    "PROGRESS_LINES",
    "SubagentSettings",
    "bounded_turn",
    "subagent_client",
]

PROGRESS_LINES = 12
DEFAULT_TASK_MAX_REQUESTS = 25
DEFAULT_TASK_TIMEOUT_S = 600.0
DEFAULT_TASK_CONCURRENCY = 3
_LINE_CHARS = 160
MAX_ANSWER_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class SubagentSettings:
    """A child's bounds: model requests (``max_requests``) and wall time (``timeout_s``); ``concurrency``: how
    many children of one answer's consecutive ``task`` calls run at once."""

    max_requests: int = DEFAULT_TASK_MAX_REQUESTS
    timeout_s: float = DEFAULT_TASK_TIMEOUT_S
    concurrency: int = DEFAULT_TASK_CONCURRENCY


class _ChildSession:
    """A child session as the turn sees it: the parent's cwd, roots, model and rules; its own history, journaled
    through ``journal`` (the parent's ``open_child``: the child stored as a session linked to the parent) when the
    parent is stored, else in memory only."""

    def __init__(self, parent: Any, mode: str, tools: ToolSet, journal: Any = None) -> None:
        self.cwd: str = parent.cwd
        self.additional_directories = tuple(getattr(parent, "additional_directories", ()))
        self.mode = mode
        self.model: str | None = parent.model
        self.permission_rules: dict[str, bool] = parent.permission_rules
        self.conversation = Conversation()
        self.tools = tools
        self._journal = journal

    async def begin_turn(self, prompt: Prompt, user: Message, /) -> Conversation:
        if self._journal is not None:
            history: Conversation = await self._journal.begin_turn(prompt, user)
            return history
        history = Conversation(list(self.conversation.messages))
        self.conversation.messages.append(user)
        return history

    async def record_steps(self, steps: tuple[ModelStep, ...], /) -> None:
        if self._journal is not None:
            await self._journal.record_steps(steps)

    async def end_turn(self, answer: Message, /) -> None:
        if self._journal is not None:
            await self._journal.end_turn(answer)
        self.conversation.messages.append(answer)

    async def mode_switched(self) -> None:
        await anyio.sleep_forever()  # a child's mode never changes


@dataclass(frozen=True, slots=True)
class _NamedAsker:
    """Asks the parent's client, naming the child in the call's title; the children of one prompt ask one at a
    time (``turn``): they may run side by side, and a session has one pending request at a time (the daemon's)."""

    parent: Any
    description: str
    turn: anyio.Lock

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        async with self.turn:
            choice: PermissionChoice = await self.parent.request_permission(
                dataclasses.replace(call, title=f"[{self.description}] {call.title}")
            )
        return choice


class _Progress:
    """The child's progress as bounded lines (its last calls, each by its latest title), and its answer so far;
    ``told``: where each of its events also goes (the client's view of the child as its own session)."""

    def __init__(self, sink: ContentSink, told: Callable[[TurnEvent], Awaitable[None]] | None = None) -> None:
        self._sink = sink
        self._told = told
        self.calls: dict[str, str] = {}
        self.answer: list[str] = []
        self._size = 0

    async def emit(self, event: TurnEvent) -> None:
        if self._told is not None:
            await self._told(event)
        if isinstance(event, TextChunk):
            if self._size < MAX_ANSWER_CHARS:
                self.answer.append(event.text)
                self._size += len(event.text)
            return
        if isinstance(event, ToolCallStarted):
            self.answer, self._size = [], 0  # the text before a tool call is not the final answer
            if len(self.calls) >= PROGRESS_LINES:
                del self.calls[next(iter(self.calls))]
        elif not (isinstance(event, ToolCallUpdated) and event.title and event.call_id in self.calls):
            return
        title = event.title or ""
        self.calls[event.call_id] = title if len(title) <= _LINE_CHARS else title[: _LINE_CHARS - 1] + "…"
        await self._sink((TextContent("\n".join(f"→ {line}" for line in self.calls.values())),))


Runner = Callable[[Any, Prompt, Any, ToolClient | None], Any]
T = TypeVar("T")


def bounded_turn(turn: T, max_requests: int) -> T:
    """A turn runner sharing ``turn``'s model client and catalog, bounded to ``max_requests`` model requests."""
    child = copy.copy(turn)
    child.settings = dataclasses.replace(turn.settings, max_turn_requests=max_requests)  # type: ignore[attr-defined]
    return child


def subagent_client(
    turn_for: Callable[[int], Runner], settings: SubagentSettings, parent: Any, client: ToolClient | None
) -> ToolClient | None:
    """``client`` with a :class:`~acp_server.tools.SubagentRunner` for ``parent``'s ``task`` calls (None stays
    None: with no client nothing could be asked, and the call fails as not available). ``turn_for(n)``: a turn
    runner bounded to ``n`` model requests."""
    if client is None:
        return None
    tools_now = getattr(parent, "tools", None)
    parent_tools = tools_now if isinstance(tools_now, ToolSet) else BUILTIN
    asking = anyio.Lock()  # one permission request of this prompt's children at a time

    async def run(description: str, prompt: str, write: bool, sink: ContentSink) -> str:
        mode = parent.mode if write else READ_ONLY_MODE
        tools = parent_tools.without("task")
        child_id = uuid.uuid4().hex  # a session id like any other: the link to its parent is stored beside it
        open_child = getattr(parent, "open_child", None)  # a stored parent stores its children
        journal = None if open_child is None else await open_child(child_id, mode, description)
        child = _ChildSession(parent, mode, tools, journal)
        face = client.children
        if face is None:
            progress, asker = _Progress(sink), _NamedAsker(client.permission, description, asking)
        else:  # the client shows the child as its own session: announced first, then its traffic under its id
            await face.announce(child_id, description)
            progress = _Progress(sink, partial(face.update, child_id))
            asker = _NamedAsker(face.asker(child_id), description, asking)
        child_client = dataclasses.replace(client, permission=asker, subagent=None, children=None)
        turn = turn_for(settings.max_requests)
        with anyio.move_on_after(settings.timeout_s) as scope:
            stop = await turn(child, Prompt((TextPart(prompt),)), progress.emit, child_client)
        if scope.cancelled_caught:
            raise ToolCallError(f"the subagent took longer than {settings.timeout_s:g} s and was stopped")
        answer = "".join(progress.answer).strip()
        if not answer:
            raise ToolCallError(f"the subagent ended ({stop}) without an answer")
        if stop == "max_turn_requests":
            answer += f"\n\n(The subagent stopped at its limit of {settings.max_requests} model requests.)"
        return answer

    return dataclasses.replace(client, subagent=run)
