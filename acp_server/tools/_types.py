"""What a tool call is made of, and what the tools need of the client (the editor) that asked for the prompt.

The tools layer knows nothing of ACP's wire: a face builds one :class:`ToolClient` per prompt from the parts it has
(the ACP handlers: ``session/request_permission``, and ``fs/*``, ``terminal/*`` as the client offers them; the
daemon: permission only); with no client, or a part absent, a tool runs locally.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from ..domain import ImagePart, PlanEntry, ToolCallStarted, ToolContent, ToolKind, ToolLocation, TurnEvent

__all__ = [
    "PERMISSION_OPTIONS",
    "ChildFace",
    "ContentSink",
    "EditorReader",
    "EditorTerminal",
    "EditorWriter",
    "PermissionAsker",
    "PermissionChoice",
    "PreparedCall",
    "SubagentRunner",
    "TerminalExit",
    "TerminalOutput",
    "ToolClient",
    "ToolResult",
    "permission_choice",
]

PermissionChoice: TypeAlias = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
"""The kind of the option the user picked; anything else the client answers (an error, an unknown option,
``cancelled``) is read as ``reject_once``."""

PERMISSION_OPTIONS: tuple[dict[str, str], ...] = (
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
)
"""The options of every permission request, whichever face asks: an ``optionId`` is its kind."""

_CHOICES: dict[object, PermissionChoice] = {
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "reject_once": "reject_once",
    "reject_always": "reject_always",
}


def permission_choice(option_id: object) -> PermissionChoice | None:
    """The choice an answered ``optionId`` stands for; None for anything that is not one of the options."""
    return _CHOICES.get(option_id) if isinstance(option_id, str) else None


@dataclass(frozen=True, slots=True)
class TerminalExit:
    exit_code: int | None
    signal: str | None


@dataclass(frozen=True, slots=True)
class TerminalOutput:
    output: str
    truncated: bool
    exit: TerminalExit | None


class PermissionAsker(Protocol):
    """Asks the user whether a call may run (``session/request_permission`` over ACP, an event and a POST on the
    daemon)."""

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice: ...


class ChildFace(Protocol):
    """Shows a subagent as its own session to a client that advertised ACP's unstable ``subagents``: announced
    (``subagent_update`` on the parent's session) before any of its traffic, then its events and permission
    requests under its own session id."""

    async def announce(self, child_id: str, description: str) -> None:
        """Announce the new child ``child_id`` (a session id like any other, stored linked to its parent)."""
        ...

    async def update(self, child_id: str, event: TurnEvent) -> None: ...

    def asker(self, child_id: str) -> PermissionAsker: ...


class EditorReader(Protocol):
    """The editor reads a text file (its unsaved buffer when it has one): ``fs/read_text_file``."""

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str: ...


class EditorWriter(Protocol):
    """The editor writes a text file (its buffer and the disk): ``fs/write_text_file``."""

    async def write_text_file(self, path: str, content: str) -> None: ...


class EditorTerminal(Protocol):
    """The editor runs a command line in a terminal it shows: ``terminal/*``."""

    async def create_terminal(self, command: str, cwd: str, output_byte_limit: int) -> str:
        """Start ``command`` (a shell command line) in a new terminal; returns its id."""
        ...

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit: ...

    async def terminal_output(self, terminal_id: str) -> TerminalOutput: ...

    async def kill_terminal(self, terminal_id: str) -> None: ...

    async def release_terminal(self, terminal_id: str) -> None: ...


class SubagentRunner(Protocol):
    """Runs a child session for the ``task`` tool: ``prompt`` with its own conversation, in the parent's mode when
    ``write`` (else ``read-only``), showing its progress through ``sink``; returns its final answer. Raises
    :class:`~acp_server.tools.ToolCallError` when it cannot run or ends without an answer."""

    async def __call__(self, description: str, prompt: str, write: bool, sink: ContentSink) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolClient:
    """The client's side of one prompt's tool calls: who is asked for permission, and the parts of the editor the
    tools use instead of local I/O. A part is None when the face has none (the client did not offer it, or the face
    is not an editor): the tools then read, write and run commands themselves. Every method of a part may raise
    :class:`~acp_server.errors.RemoteError` (the client answered an error, or the connection closed) and is
    cancelled with the prompt. Paths are absolute."""

    permission: PermissionAsker
    reader: EditorReader | None = None
    writer: EditorWriter | None = None
    terminal: EditorTerminal | None = None
    subagent: SubagentRunner | None = None
    """Runs a child session (the turn sets it; None: subagents are not available here)."""
    children: ChildFace | None = None
    """Shows a child as its own session (None: the client did not advertise ``subagents``; the call shows it)."""


ContentSink: TypeAlias = Callable[[tuple[ToolContent, ...]], Awaitable[None]]
"""Where a running tool shows content before it ends (a terminal, embedded in the call as soon as it exists)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """How a call ended: ``output`` is what the model gets (capped), ``content`` what the editor shows,
    ``raw_output`` a JSON value for ``rawOutput``, ``failed`` whether the call ends ``failed``; ``plan`` the whole
    plan a call set (``update_plan``; None for every other tool), which the turn reports after the call;
    ``images`` what the model is shown besides ``output`` (an MCP tool's images; the turn's only, never stored);
    ``question``: a question and the text to answer it over, which the turn answers with the model in a tool-less
    side request, the answer following ``output`` (``web_fetch`` with a ``prompt``)."""

    output: str
    content: tuple[ToolContent, ...] = ()
    raw_output: object = None
    failed: bool = False
    plan: tuple[PlanEntry, ...] | None = None
    images: tuple[ImagePart, ...] = ()
    question: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A validated tool call, ready to be shown, asked about and run.

    ``title``/``kind``/``locations``/``preview`` are the announcement (``preview``: an edit's diff, computed before
    permission so the user sees what will change); ``needs_permission`` is the tool's nature (edits and commands),
    the mode decides whether to ask; ``run`` executes it (cancelled with the prompt; kills what it started);
    ``rule`` keys the session's "always" answers.
    """

    name: str
    title: str
    kind: ToolKind
    locations: tuple[ToolLocation, ...]
    preview: tuple[ToolContent, ...]
    needs_permission: bool
    run: Callable[[ContentSink], Awaitable[ToolResult]]
    rule: str | None = None
    """Where the session remembers an "always" answer for this call (None: per tool kind, as for the built-ins;
    an MCP tool's: per tool)."""
    sandboxed: bool = False
    """Whether it runs inside the kernel sandbox (``sandbox`` mode lets such a call run unasked)."""
