"""The domain vocabulary, the ground floor every layer builds on: what the user sent, what the model streamed
back, how a prompt ended, and the history of a session.

These types are transport-neutral: the ACP layer converts wire content blocks into :class:`Prompt` parts and
:class:`TurnEvent` values back into ``session/update`` notifications; the store writes them; the turn sends them to
the model. Nothing here imports another module of the package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

__all__ = [
    "Compacted",
    "Compacting",
    "Compaction",
    "CompactionStopped",
    "ContextUsage",
    "Conversation",
    "DiffContent",
    "Emit",
    "ImageContent",
    "ImagePart",
    "Message",
    "ModelStep",
    "Notice",
    "NoticeSeverity",
    "Outcome",
    "PlanEntry",
    "PlanPriority",
    "PlanStatus",
    "PlanUpdated",
    "Prompt",
    "PromptEnded",
    "PromptEvent",
    "PromptPart",
    "ResourceLinkPart",
    "ResourcePart",
    "RetryNotice",
    "StopReason",
    "TerminalContent",
    "TextChunk",
    "TextContent",
    "TextPart",
    "ThoughtChunk",
    "ToolCallRecord",
    "ToolCallStarted",
    "ToolCallUpdated",
    "ToolContent",
    "ToolKind",
    "ToolLocation",
    "ToolStatus",
    "TurnEvent",
    "UsageReported",
    "UserChunk",
    "answer_message_id",
    "base64_size",
    "compaction_id",
]

StopReason: TypeAlias = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ResourceLinkPart:
    uri: str
    name: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ResourcePart:
    """An embedded resource; ``text`` is None for a binary blob (only its uri reaches the model)."""

    uri: str
    text: str | None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class ImagePart:
    data: str  # base64
    mime_type: str


PromptPart: TypeAlias = TextPart | ResourceLinkPart | ResourcePart | ImagePart


@dataclass(frozen=True, slots=True)
class Prompt:
    parts: tuple[PromptPart, ...]

    @property
    def title(self) -> str:
        """A one-line summary (first text part), for session titles and logs."""
        for part in self.parts:
            if isinstance(part, TextPart) and part.text.strip():
                return part.text.strip().splitlines()[0][:80]
        return ""

    @property
    def text(self) -> str:
        """The prompt as one text, its parts joined by blank lines: text as is, a link in Markdown, an embedded
        resource in a ``<context uri>`` block (a binary one named), images left out. A session stores it as the
        user's message; the model gets it, followed by the images."""
        texts: list[str] = []
        for part in self.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ResourceLinkPart):
                texts.append(f"[{part.name}]({part.uri})" + (f" — {part.description}" if part.description else ""))
            elif isinstance(part, ResourcePart):
                if part.text is None:
                    texts.append(f"[binary resource: {part.uri}]")
                else:
                    texts.append(f'<context uri="{part.uri}">\n{part.text}\n</context>')
        return "\n\n".join(texts)


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the assistant's answer; ``message_id`` (local to the session, see :func:`answer_message_id`) is
    the same for every piece of one message."""

    text: str
    message_id: str = field(default="", kw_only=True)


@dataclass(frozen=True, slots=True)
class ThoughtChunk:
    """A piece of the model's reasoning; ``message_id`` as :class:`TextChunk`'s."""

    text: str
    message_id: str = field(default="", kw_only=True)


def answer_message_id(seq: int, step: int, kind: Literal["text", "thought"]) -> str:
    """The session-local id of one message of the answer stored as ``seq``: its text or its thought of request
    ``step`` (0-based; a tool call ends a message). Live chunks and their replay share it."""
    return f"{seq}.{step}" if kind == "text" else f"{seq}.{step}.thought"


@dataclass(frozen=True, slots=True)
class RetryNotice(ThoughtChunk):
    """The model request failed and is retried in ``delay_ms``: a thought for whoever watches (``text`` says it),
    never stored nor sent to the model. ``attempt`` is the 1-based attempt that failed, ``reason`` why; ``title``
    says it as a notice (for a client that shows notices)."""

    attempt: int = 0
    delay_ms: int = 0
    reason: str = ""
    title: str = ""


NoticeSeverity: TypeAlias = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know beside the conversation (an MCP server gone, an instructions file cut, a
    learned context window): live only — never stored, never replayed, never sent to the model."""

    severity: NoticeSeverity
    title: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class UserChunk:
    """A replayed piece of a user prompt (history replay only)."""

    part: PromptPart


ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class ToolLocation:
    """A file a tool call touches: an absolute path, and a 1-based line when one is known."""

    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class TextContent:
    """Plain text shown in a tool call (its output, or why it failed)."""

    text: str


@dataclass(frozen=True, slots=True)
class DiffContent:
    """A file change shown as a diff: ``old_text`` None for a new file."""

    path: str
    old_text: str | None
    new_text: str


def base64_size(data: str) -> int:
    """The bytes ``data`` (base64, padded) decodes to."""
    return len(data) * 3 // 4 - data[-2:].count("=")


@dataclass(frozen=True, slots=True)
class ImageContent:
    """An image a tool returned, shown in the call (base64 ``data``). Never stored: whoever makes one puts its
    :attr:`note` in the call's text, and that text is what history keeps."""

    data: str
    mime_type: str

    @property
    def note(self) -> str:
        """The text that stands for the image where it is not kept (stored history, replay): its decoded size."""
        return f"[image ({self.mime_type}, {base64_size(self.data)} bytes)]"


@dataclass(frozen=True, slots=True)
class TerminalContent:
    """A terminal the client runs for the call (live output in the editor)."""

    terminal_id: str


ToolContent: TypeAlias = TextContent | DiffContent | ImageContent | TerminalContent


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call the model asked for, announced before it runs (status ``pending``).

    ``call_id`` is the model's id of the call; ``raw_input`` its parsed arguments (None when they were not JSON);
    ``content`` what the user should see before deciding (an edit's diff); ``name`` the tool's name as the model
    called it (``read_file``, ``mcp__server__tool``).
    """

    call_id: str
    title: str
    kind: ToolKind
    raw_input: object = None
    locations: tuple[ToolLocation, ...] = ()
    content: tuple[ToolContent, ...] = ()
    name: str = field(default="", kw_only=True)


@dataclass(frozen=True, slots=True)
class ToolCallUpdated:
    """A change to an announced tool call: only the fields that are not None changed (``raw_input``: the arguments
    so far, while they stream, then as they ended)."""

    call_id: str
    status: ToolStatus | None = None
    title: str | None = None
    content: tuple[ToolContent, ...] | None = None
    locations: tuple[ToolLocation, ...] | None = None
    raw_output: object = None
    kind: ToolKind | None = None
    raw_input: object = None


PlanStatus: TypeAlias = Literal["pending", "in_progress", "completed"]
PlanPriority: TypeAlias = Literal["high", "medium", "low"]


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One step of the model's plan: what it is, where it stands, how much it matters (ACP's ``PlanEntry``)."""

    content: str
    status: PlanStatus
    priority: PlanPriority = "medium"


@dataclass(frozen=True, slots=True)
class PlanUpdated:
    """The model replaced its plan (an ``update_plan`` call that completed): ``entries`` is the whole plan, in
    order, as ACP wants every ``plan`` update to carry it."""

    entries: tuple[PlanEntry, ...]


@dataclass(frozen=True, slots=True)
class UsageReported:
    """What one model request of a turn used, as the endpoint reported it (sent after the request ends).

    ``input_tokens`` / ``output_tokens``: its prompt and completion tokens; ``used`` (their sum) is what the
    context holds after it. ``size``: the model's context window when it is known (configured, reported by the
    endpoint or a documented family limit), None when it is not — never a guess.
    """

    input_tokens: int
    output_tokens: int
    size: int | None = None

    @property
    def used(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Compacting:
    """The turn shrinks what the model sees before its next request (sent before any summary request starts).

    ``reason``: ``threshold`` (the next request would pass the compaction threshold), ``refused`` (the endpoint
    refused the last one as too long), ``requested`` (``/compact``); ``estimate``: tokens the request would have
    had; ``size``: the context window when known. ``compaction_id``: the compaction's id, the same on its
    :class:`Compacted` or :class:`CompactionStopped` (see :func:`compaction_id`).
    """

    reason: Literal["threshold", "refused", "requested"]
    estimate: int
    size: int | None = None
    compaction_id: str = field(default="", kw_only=True)


@dataclass(frozen=True, slots=True)
class Compacted:
    """The compaction announced by the last :class:`Compacting` is done: messages ``1..through`` of the session
    are summarised (``through`` 0: only older tool outputs were elided); ``estimate`` is what the next request
    holds now (the context's new ``used``); ``summary`` the summary kept (``""``: outputs elided only)."""

    through: int
    estimate: int
    size: int | None = None
    compaction_id: str = field(default="", kw_only=True)
    summary: str = field(default="", kw_only=True)


@dataclass(frozen=True, slots=True)
class CompactionStopped:
    """The compaction announced by the last :class:`Compacting` ended without a summary: ``failed`` (``error``
    says why; ``note``, when not empty, is what a client that shows no compaction updates is told) or
    ``cancelled`` (the prompt was)."""

    compaction_id: str
    status: Literal["failed", "cancelled"]
    error: str = ""
    note: str = ""


def compaction_id(through: int) -> str:
    """The session-local id of the compaction that summarises messages ``1..through`` (its stored record's key;
    live and replayed updates share it)."""
    return f"compaction-{through}"


TurnEvent: TypeAlias = (
    TextChunk
    | ThoughtChunk
    | UserChunk
    | ToolCallStarted
    | ToolCallUpdated
    | PlanUpdated
    | UsageReported
    | Compacting
    | Compacted
    | CompactionStopped
    | Notice
)
Emit: TypeAlias = Callable[[TurnEvent], Awaitable[None]]
"""Where a turn sends its events, in order; awaiting it is the backpressure of whoever reads them."""


@dataclass(frozen=True, slots=True)
class PromptEnded:
    """The last event of a prompt's stream: its stop reason, or the failure that settled it (exactly one is set)."""

    stop_reason: StopReason | None = None
    error: Exception | None = None

    def result(self) -> StopReason:
        """The stop reason, or raise the failure."""
        if self.error is not None:
            raise self.error
        assert self.stop_reason is not None
        return self.stop_reason


PromptEvent: TypeAlias = TurnEvent | PromptEnded
"""What a prompt's event stream yields: its turn's events in order, then exactly one :class:`PromptEnded`."""


Outcome: TypeAlias = Literal["complete", "failed", "cancelled", "interrupted", "running"]
"""How a message ended. A turn ends ``complete``, ``failed`` or ``cancelled``; a stored answer whose process died
mid-turn reads ``interrupted``, one still being streamed by another process ``running``."""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call of a turn as it ended: what the model asked (``name``, raw JSON ``arguments``), what it got
    back (``output``, the ``tool`` message; ``images``, shown to the model after the step's tool messages), and
    what the editor was shown (title, kind, locations, content; ``plan``: the whole plan an ``update_plan`` call
    set, None for every other call). Images live only while the turn runs: :meth:`without_images` is what is kept."""

    call_id: str
    name: str
    arguments: str
    output: str
    status: Literal["completed", "failed"]
    title: str
    kind: ToolKind
    locations: tuple[ToolLocation, ...] = ()
    content: tuple[ToolContent, ...] = ()
    raw_output: object = None
    plan: tuple[PlanEntry, ...] | None = None
    images: tuple[ImagePart, ...] = ()

    def without_images(self) -> ToolCallRecord:
        """The call as history keeps it: no images, neither for the model nor in the editor's content (the text
        holds their notes)."""
        if not self.images and not any(isinstance(c, ImageContent) for c in self.content):
            return self
        return replace(self, images=(), content=tuple(c for c in self.content if not isinstance(c, ImageContent)))


@dataclass(frozen=True, slots=True)
class ModelStep:
    """One model request of a turn that ended asking for tools: what it streamed, then its calls, in order.

    Only calls that ended are recorded (a process killed mid-call loses that call, nothing before it).
    """

    text: str
    reasoning: str
    calls: tuple[ToolCallRecord, ...]

    def without_images(self) -> ModelStep:
        """The step as history keeps it (see :meth:`ToolCallRecord.without_images`)."""
        calls = tuple(c.without_images() for c in self.calls)
        return self if calls == self.calls else ModelStep(self.text, self.reasoning, calls)


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """How big the last model request of an answer was: ``reported`` prompt tokens, as the endpoint said, and
    ``estimated``, this server's estimate of the same request; their ratio corrects the estimates after it."""

    reported: int
    estimated: int


@dataclass(frozen=True, slots=True)
class Compaction:
    """A summary of the session's messages ``1..through`` (``through`` even: whole turns): what the model sees
    instead of them. The messages themselves stay stored and replayed as they are."""

    through: int
    summary: str


@dataclass(slots=True)
class Message:
    """One entry of a conversation, in the model's terms.

    An answer's ``steps`` are its tool-calling model requests, in order, before its final ``content``; its
    ``usage`` the size of its last request when the endpoint reported it (a measurement, not part of what the message
    says: equality ignores it).
    """

    role: Literal["user", "assistant"]
    content: str
    reasoning: str = ""
    stop_reason: StopReason | None = None
    outcome: Outcome = "complete"
    steps: tuple[ModelStep, ...] = ()
    usage: ContextUsage | None = field(default=None, compare=False)


@dataclass(slots=True)
class Conversation:
    """The history of one session, oldest first, and its latest compaction (None: never compacted). Mutated only
    by the turn that owns the session's FIFO slot."""

    messages: list[Message] = field(default_factory=list)
    compaction: Compaction | None = None

    def fork(self) -> Conversation:
        return Conversation(
            [
                Message(m.role, m.content, m.reasoning, m.stop_reason, m.outcome, m.steps, m.usage)
                for m in self.messages
            ],
            self.compaction,
        )
