"""One session of the bridge: where it works, its conversation and journal, and its FIFO.

A *journaled* session lives in the store: its in-memory conversation is a copy of the stored history, changed only
after the store has committed (:meth:`SessionEntry.begin_turn` / :meth:`SessionEntry.end_turn`), and caught up with
what other processes stored at each turn start. An unjournaled one lives in memory only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from ..checkpoints import SessionCheckpoints
from ..domain import Compaction, Conversation, Message, ModelStep, Prompt
from ..errors import ServerError
from ..mcp import McpServerConfig, McpServers, McpSettings
from ..modes import DEFAULT_MODE
from ..store import Rewind, SessionStore, TurnTicket
from ..system_prompts import ClientPrompt
from ..tools.builtin import builtin_tool_set
from ..tools.registry import ToolSet
from ._exceptions import BridgeClosedError, SessionClosedError
from ._fifo import Fifo
from ._prompt import Cause, PromptHandle, PromptJob
from ._roots import active_directories

__all__ = ["ForkRequest", "SessionEntry", "Setting", "SettingsChange", "now"]

Setting = Literal["mode", "model", "title"]


def now() -> datetime:
    return datetime.now(UTC)


class ForkRequest:
    """A fork waiting in a session's FIFO: serialized like a prompt, but never counted and never refused."""

    __slots__ = ("abandoned", "additional_directories", "child", "cwd", "done", "error", "key", "system_prompt")

    def __init__(
        self,
        key: int,
        cwd: str | None,
        additional_directories: tuple[str, ...] | None = None,
        system_prompt: ClientPrompt | None = None,
    ) -> None:
        self.key = key
        self.cwd = cwd
        self.additional_directories = additional_directories  # the child's (None: the source's)
        self.system_prompt = system_prompt  # the child's (None: the source's)
        self.child: SessionEntry | None = None
        self.error: ServerError | None = None
        self.done = anyio.Event()
        self.abandoned = False  # the caller left while the copy was being stored

    def fail(self, error: ServerError) -> None:
        """Decide the fork's failure unless it was already decided; either way it is done."""
        if self.child is None and self.error is None:
            self.error = error
        self.done.set()


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """``setting`` of ``session`` changed from ``previous`` (its value now is on the session), asked by ``origin``
    (whatever the face that asked passed; None: no face asked, e.g. a title read back from the store).

    Invariant: made only when the value really changed (setting the value it has makes none).
    """

    session: SessionEntry
    setting: Setting
    previous: str | None
    origin: object | None = None

    @property
    def session_id(self) -> str:
        return self.session.session_id


class SessionEntry:
    """One session: cwd, conversation, FIFO. ``pending_prompt_count`` = waiting prompts + the running one.

    With a ``journal`` (the store), ``conversation.messages[:synced]`` equal the stored messages ``1..synced``;
    the turn that holds the FIFO is the only writer, through :meth:`begin_turn` and :meth:`end_turn`.

    Every real change of its mode, model or title is told to ``on_change`` (the bridge's settings listeners) once,
    synchronously, after it is stored and in memory; setting the value it has tells nothing.
    """

    def __init__(
        self,
        session_id: str,
        cwd: str,
        conversation: Conversation,
        title: str = "",
        *,
        journal: SessionStore | None = None,
        synced: int = 0,
        mode: str = DEFAULT_MODE,
        model: str | None = None,
        on_change: Callable[[SettingsChange], None] | None = None,
        tools: ToolSet | None = None,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.additional_directories: tuple[str, ...] = ()  # further roots of its tools, after the cwd (in order)
        self.system_prompt: ClientPrompt | None = None  # the client's own (ACP systemPrompt), None: none
        self.conversation = conversation
        self.title = title  # the store's title (the first prompt's first line unless set), '' for none yet
        self.mode = mode  # how tool calls are permitted (the turn layer defines the modes)
        self.model = model  # the model picked for the next requests; None: the server's default
        self.permission_rules: dict[str, bool] = {}  # tool kind (an MCP tool: its name) -> always allowed / rejected
        # what the model may call: the built-ins and the session's MCP servers' tools
        self.tools = builtin_tool_set() if tools is None else tools
        self.mcp: McpServers | None = None  # the session's MCP connections (None: it never had a server)
        self.created_at = self.updated_at = now()
        self.closed_event = anyio.Event()  # set once closed: nothing waits on a closed session's readers
        self._mode_switch = anyio.Event()  # set (and replaced) at each change of mode
        self.fifo: Fifo[ForkRequest] = Fifo()
        self.checkpoints: SessionCheckpoints | None = None  # what its prompts changed in files (``/rewind``)
        self.rewinds: list[Rewind] = []  # the conversation's rewinds: what the model no longer sees
        self._journal = journal
        self._synced = synced
        self._ticket: TurnTicket | None = None
        self._on_change = on_change

    @property
    def closed(self) -> bool:
        """Detached from the bridge (closed, or the bridge closed): it takes no more work."""
        return self.closed_event.is_set()

    @property
    def journal(self) -> SessionStore | None:
        """The store this session's history is written to (None: memory only)."""
        return self._journal

    @property
    def journaled(self) -> bool:
        """Whether this session's history is written to the store."""
        return self._journal is not None

    @property
    def synced(self) -> int:
        """How many messages of the conversation are known to be stored."""
        return self._synced

    @property
    def pending_prompt_count(self) -> int:
        return self.fifo.pending

    @property
    def running(self) -> PromptHandle | None:
        job = self.fifo.running
        return None if job is None else job.handle

    async def begin_turn(self, prompt: Prompt, user: Message) -> Conversation:
        """Record the prompt (store first, then memory); return the history the model gets before it.

        The store call is shielded: once its transaction commits, the caller always gets the ticket, so the
        turn's answer is always ended (a cancellation surfaces at the caller's next checkpoint).
        """
        messages = self.conversation.messages
        if self._journal is None:
            history = self._seen(list(messages), self.conversation.compaction)
            messages.append(user)
            self._retitled(self.title or prompt.title, None)
            self._checkpoint(len(messages))
            return history
        with anyio.CancelScope(shield=True):
            ticket = await self._journal.begin_turn(
                self.session_id, known=self._synced, content=user.content, parts=prompt.parts, title=prompt.title
            )
        self._retitled(ticket.title, None)
        del messages[ticket.since :]
        messages.extend(message.to_message() for message in ticket.catch_up)
        self.conversation.compaction = ticket.compaction  # the latest stored (another process may have compacted)
        history = self._seen(list(messages), ticket.compaction)
        messages.append(user)
        self._synced = ticket.user_seq
        self._ticket = ticket
        self._checkpoint(ticket.user_seq)
        return history

    def _checkpoint(self, seq: int) -> None:
        if self.checkpoints is not None:
            self.checkpoints.begin(seq)

    def _kept(self, count: int) -> list[int]:
        """The seqs of the first ``count`` messages that no rewind covers."""
        return [seq for seq in range(1, count + 1) if not any(r.covers(seq) for r in self.rewinds)]

    def _seen(self, messages: list[Message], compaction: Compaction | None) -> Conversation:
        """What the model sees of ``messages`` (message ``i`` is seq ``i + 1``): without the rewound ones. A
        stored compaction (through a seq) counts the kept messages it covers; one that ends inside a rewound range
        summarised rewound turns and is left out (the model then gets the messages themselves)."""
        if not self.rewinds:
            return Conversation(messages, compaction)
        kept = self._kept(len(messages))
        if compaction is not None:
            if any(r.covers(compaction.through) for r in self.rewinds):
                compaction = None
            else:
                through = sum(1 for seq in kept if seq <= compaction.through)
                compaction = Compaction(through, compaction.summary) if through else None
        return Conversation([messages[seq - 1] for seq in kept], compaction)

    def seen(self) -> Conversation:
        """The conversation as the model sees it now (what ``/compact`` summarises)."""
        return self._seen(list(self.conversation.messages), self.conversation.compaction)

    def _stored(self, compaction: Compaction) -> Compaction:
        """A compaction of the model's view (through its ``through``-th message) as stored: through that message's
        seq."""
        if not self.rewinds or compaction.through < 1:
            return compaction
        kept = self._kept(len(self.conversation.messages))
        through = kept[min(compaction.through, len(kept)) - 1] if kept else compaction.through
        return Compaction(through, compaction.summary)

    def prompt_seqs(self) -> list[tuple[int, Message]]:
        """The prompts the model still sees, oldest first: each user message's seq and the message."""
        return [
            (i + 1, m)
            for i, m in enumerate(self.conversation.messages)
            if m.role == "user" and not any(r.covers(i + 1) for r in self.rewinds)
        ]

    async def rewind_conversation(self, start: int) -> Rewind:
        """The model no longer sees the messages from ``start`` (a prompt's seq) to the last one (store first, then
        memory); they stay in the history. Called in the session's FIFO slot (no turn runs)."""
        rewind = Rewind(start, max(start, len(self.conversation.messages)))
        if self._journal is not None:
            await self._journal.record_rewind(self.session_id, rewind)
        self.rewinds = [r for r in self.rewinds if r.through != rewind.through] + [rewind]
        return rewind

    async def record_steps(self, steps: tuple[ModelStep, ...]) -> None:
        """Record the tool-calling steps of the running turn so far (store only: memory gets them with the answer),
        so a process killed mid-tool loses at most the call it was running."""
        if self._journal is None or self._ticket is None:
            return
        await self._journal.record_steps(self._ticket, steps)

    async def open_child(self, child_id: str, mode: str, title: str) -> SessionEntry | None:
        """A subagent child of this session (its ``task`` call's), stored as a session linked to it (``task_of``:
        listed only under it, deleted with it) with ``title``; its turn journals through the entry returned, which
        no registry holds (no face can prompt it). None when this session is not stored: the child lives in memory."""
        if self._journal is None:
            return None
        directories = self.additional_directories
        await self._journal.create_session(
            child_id, self.cwd, mode=mode, additional_directories=directories, task_of=self.session_id
        )
        await self._journal.set_title(child_id, title)
        child = SessionEntry(child_id, self.cwd, Conversation(), title, journal=self._journal, mode=mode)
        child.model = self.model
        return child

    async def record_compaction(self, compaction: Compaction) -> None:
        """Keep ``compaction`` as what the model sees instead of messages ``1..through`` (store first, then memory);
        called by the turn that holds the FIFO, for messages before its prompt. The messages stay as they are."""
        compaction = self._stored(compaction)
        if self._journal is not None:
            await self._journal.record_compaction(self.session_id, compaction)
        self.conversation.compaction = compaction

    async def set_mode(self, mode: str, *, origin: object | None = None) -> None:
        """Change the session's mode (store first, then memory, then told as asked by ``origin``)."""
        if self._journal is not None:
            await self._journal.set_mode(self.session_id, mode)
        previous, self.mode = self.mode, mode
        if previous != mode:
            switched, self._mode_switch = self._mode_switch, anyio.Event()
            switched.set()
        self._changed("mode", previous, mode, origin)

    async def mode_switched(self) -> None:
        """Return at the session's next change of mode (a turn withdraws a permission request the new mode no
        longer allows)."""
        await self._mode_switch.wait()

    async def set_model(self, model: str | None, *, origin: object | None = None) -> None:
        """Change the session's model (store first, then memory, then told); the turn reads it before each model
        request."""
        if self._journal is not None:
            await self._journal.set_model(self.session_id, model)
        previous, self.model = self.model, model
        self._changed("model", previous, model, origin)

    async def activate(self, checked: tuple[str, ...] | None, prompt: ClientPrompt | None) -> None:
        """What a new, load, resume request gives: its ``checked`` directories and the client's system ``prompt``
        (each None: keep the session's)."""
        await self.activate_directories(checked)
        await self.set_system_prompt(prompt)

    async def set_system_prompt(self, prompt: ClientPrompt | None) -> None:
        """The client's system prompt from the session's next turn (None: keep it); store first, then memory."""
        if prompt is None or prompt == self.system_prompt:
            return
        if self._journal is not None:
            await self._journal.set_system_prompt(self.session_id, prompt)
        self.system_prompt = prompt

    async def activate_directories(self, checked: tuple[str, ...] | None) -> None:
        """The ``checked`` directories (``_roots.check_additional_directories``; None: keep the session's) are its
        whole list of additional directories from its next tool call, less those that add nothing to its cwd."""
        if checked is not None:
            await self.set_additional_directories(active_directories(self.cwd, checked))

    async def set_additional_directories(self, directories: tuple[str, ...]) -> None:
        """The session's additional directories are ``directories`` from its next tool call (store first, then
        memory; nothing is written when they are the same)."""
        if directories == self.additional_directories:
            return
        if self._journal is not None:
            await self._journal.set_additional_directories(self.session_id, directories)
        self.additional_directories = directories

    async def set_title(self, title: str, *, origin: object | None = None) -> None:
        """Change the session's title (store first, then memory, then told); ``''`` lets the next prompt title it."""
        if self._journal is not None:
            await self._journal.set_title(self.session_id, title)
        self._retitled(title, origin)

    def title_if_untitled(self, title: str, *, origin: object | None = None) -> None:
        """Take ``title`` (a prompt's, at admission) when the session has none yet; the store takes it when that
        prompt's turn begins."""
        if not self.title:
            self._retitled(title, origin)

    def _retitled(self, title: str, origin: object | None) -> None:
        previous, self.title = self.title, title
        self._changed("title", previous, title, origin)

    def _changed(self, setting: Setting, previous: str | None, now: str | None, origin: object | None) -> None:
        if previous != now and self._on_change is not None:
            self._on_change(SettingsChange(self, setting, previous, origin))

    async def end_turn(self, answer: Message) -> None:
        """Record the answer of the turn begun last (store first, then memory); call once per ``begin_turn``.

        The running prompt's outcome is decided first (``PromptJob.seal``): what is stored is what it answers.
        """
        running = self.fifo.running
        if self.checkpoints is not None:
            self.checkpoints.end()
        if running is not None:
            answer = running.seal(answer)
        if self._journal is None:
            self.conversation.messages.append(answer)
            return
        ticket, self._ticket = self._ticket, None
        if ticket is None:
            raise RuntimeError("end_turn() without begin_turn()")
        outcome = answer.outcome
        if outcome != "complete" and outcome != "cancelled" and outcome != "failed":
            raise ValueError(f"a turn ends complete, cancelled or failed, not {outcome!r}")
        await self._journal.end_turn(
            ticket,
            content=answer.content,
            reasoning=answer.reasoning,
            stop_reason=answer.stop_reason,
            outcome=outcome,
            steps=answer.steps,
            usage=answer.usage,
        )
        self.conversation.messages.append(answer)
        self._synced = ticket.answer_seq

    async def connect_mcp(
        self,
        servers: Sequence[McpServerConfig] | None,
        settings: McpSettings,
        tg: TaskGroup,
        on_prompts: Callable[[], None] | None = None,
    ) -> None:
        """Connect the session to ``servers`` (None: keep what it has; the same list again: keep the connections;
        another list: replace them, the newest env and headers win), hosted in ``tg``; bounded by the settings'
        connect timeout. A server that fails leaves its tools out (see :meth:`McpServers.status`). ``on_prompts``:
        told when the servers' prompts change once connected (the session's commands)."""
        if servers is None or self.closed:
            return
        if self.mcp is None:
            if not servers:
                return
            self.mcp = McpServers(self.tools, self.cwd, settings, on_prompts, self.session_id)
        elif self.mcp.configs == tuple(servers):
            return
        await self.mcp.connect(servers, tg)

    def mcp_status(self) -> list[dict[str, object]]:
        """Each MCP server's state (empty: none)."""
        return [] if self.mcp is None else self.mcp.status()

    def shutdown(self, cause: Cause) -> PromptJob | None:
        """Close: settle everything waiting, interrupt the running prompt (returned, to be awaited), stop the MCP
        servers (their tasks unwind in the bridge's task group)."""
        self.closed_event.set()
        if self.mcp is not None:
            self.mcp.close()
        for item in self.fifo.drain():
            if isinstance(item, ForkRequest):
                item.fail(SessionClosedError(self.session_id) if cause is Cause.SESSION_CLOSED else BridgeClosedError())
            else:
                item.interrupt(cause)
        running = self.fifo.running
        if running is not None:
            running.interrupt(cause)
        return running

    def __repr__(self) -> str:
        return f"<SessionEntry {self.session_id} pending={self.fifo.pending} cwd={self.cwd!r}>"
