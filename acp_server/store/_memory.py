"""The in-memory session store (``--no-persist``): the same contract as the SQLite store, nothing on disk.

History outlives ``session/close`` (as on disk) and ends with the process. Every call is one step of the event loop
(a checkpoint, then the change, with no await in between), which is what "one transaction" means here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import anyio.lowlevel

from ..domain import Compaction, ContextUsage, ModelStep, PromptPart, StopReason
from ..system_prompts import ClientPrompt
from ._base import SessionStore
from ._exceptions import StoredSessionNotFoundError, StoreIOError, StoreUnavailableError
from ._types import (
    DEFAULT_PAGE_SIZE,
    FinalOutcome,
    Rewind,
    SessionPage,
    SessionRecord,
    SessionSnapshot,
    StoredMessage,
    TurnTicket,
    cwd_key,
    decode_cursor,
    encode_cursor,
)

__all__ = ["MemorySessionStore"]


@dataclass(slots=True)
class _Row:
    message: StoredMessage  # outcome "running" stands for "pending" here; owner says whose
    owner: str | None = None


def _pending(rows: list[_Row]) -> list[tuple[int, str | None]]:
    """``(seq, owner)`` of the pending answers among ``rows``."""
    return [(row.message.seq, row.owner) for row in rows if row.message.outcome == "running"]


class MemorySessionStore(SessionStore):
    persistent = False

    def __init__(self) -> None:
        super().__init__()
        self._sessions: dict[str, SessionRecord] = {}
        self._rows: dict[str, list[_Row]] = {}
        self._compactions: dict[str, Compaction] = {}  # the latest of each session that has one
        self._rewinds: dict[str, tuple[Rewind, ...]] = {}

    @property
    def location(self) -> str:
        return ":memory:"

    async def _open(self) -> StoreUnavailableError | None:
        return None

    async def _close(self) -> None:
        self._sessions.clear()
        self._rows.clear()
        self._compactions.clear()
        self._rewinds.clear()

    async def _enter(self) -> None:
        self._check()
        await anyio.lowlevel.checkpoint()
        self._check()

    def _read(self, session_id: str, row: _Row) -> StoredMessage:
        message = row.message
        if message.outcome == "running":
            return replace(message, outcome=self._pending_outcome(row.owner, session_id, message.seq))
        return message

    def _touch(self, session_id: str, now: int, title: str | None = None) -> None:
        record = self._sessions[session_id]
        new_title = title if title and not record.title else record.title
        self._sessions[session_id] = replace(record, updated_us=now, title=new_title)

    # -- sessions --------------------------------------------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        cwd: str,
        *,
        mode: str | None = None,
        additional_directories: tuple[str, ...] = (),
        task_of: str | None = None,
    ) -> SessionRecord:
        await self._enter()
        if session_id in self._sessions:
            raise StoreIOError(self.location, f"session {session_id} already exists")
        now = self._tick()
        record = SessionRecord(session_id, cwd, "", now, now, mode, None, tuple(additional_directories), None, task_of)
        self._sessions[session_id] = record
        self._rows[session_id] = []
        return record

    async def get_session(self, session_id: str) -> SessionRecord | None:
        await self._enter()
        return self._sessions.get(session_id)

    async def read_session(self, session_id: str) -> SessionSnapshot | None:
        await self._enter()
        record = self._sessions.get(session_id)
        if record is None:
            return None
        messages = tuple(self._read(session_id, row) for row in self._rows[session_id])
        return SessionSnapshot(record, messages, self._compactions.get(session_id), self._rewinds.get(session_id, ()))

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        after = decode_cursor(cursor) if cursor is not None else None
        await self._enter()
        key = None if cwd is None else cwd_key(cwd)
        records = sorted(
            (r for r in self._sessions.values() if r.task_of is None and (key is None or cwd_key(r.cwd) == key)),
            key=lambda r: (r.updated_us, r.session_id),
            reverse=True,
        )
        if after is not None:
            records = [r for r in records if (r.updated_us, r.session_id) < after]
        page = tuple(records[:limit])
        return SessionPage(page, encode_cursor(page[-1]) if len(records) > limit else None)

    async def list_children(self, session_id: str) -> tuple[SessionRecord, ...]:
        await self._enter()
        children = (r for r in self._sessions.values() if r.task_of == session_id)
        return tuple(sorted(children, key=lambda r: (r.created_us, r.session_id)))

    async def fork_session(
        self,
        source_id: str,
        session_id: str,
        *,
        cwd: str,
        mode: str | None = None,
        additional_directories: tuple[str, ...] = (),
    ) -> SessionRecord:
        await self._enter()
        source = self._sessions.get(source_id)
        if source is None:
            raise StoredSessionNotFoundError(source_id)
        now = self._tick()
        record = self._sessions[session_id] = SessionRecord(
            session_id,
            cwd,
            source.title,
            now,
            now,
            source.mode if mode is None else mode,
            source.model,
            tuple(additional_directories),
        )
        self._rows[session_id] = [
            _Row(replace(row.message, outcome="interrupted") if row.message.outcome == "running" else row.message)
            for row in self._rows[source_id]
        ]
        if source_id in self._compactions:
            self._compactions[session_id] = self._compactions[source_id]
        if source_id in self._rewinds:
            self._rewinds[session_id] = self._rewinds[source_id]
        return record

    async def delete_session(self, session_id: str) -> None:
        await self._enter()
        rows = self._rows.get(session_id)
        if rows is None:
            raise StoredSessionNotFoundError(session_id)
        self._refuse_running(session_id, _pending(rows))
        children = [r.session_id for r in self._sessions.values() if r.task_of == session_id]
        for gone in (*children, session_id):  # its subagent children go with it
            del self._sessions[gone], self._rows[gone]
            self._compactions.pop(gone, None)
            self._rewinds.pop(gone, None)

    async def set_mode(self, session_id: str, mode: str) -> None:
        await self._enter()
        record = self._sessions.get(session_id)
        if record is None:
            raise StoredSessionNotFoundError(session_id)
        self._sessions[session_id] = replace(record, mode=mode)

    async def set_model(self, session_id: str, model: str | None) -> None:
        await self._enter()
        record = self._sessions.get(session_id)
        if record is None:
            raise StoredSessionNotFoundError(session_id)
        self._sessions[session_id] = replace(record, model=model)

    async def set_additional_directories(self, session_id: str, directories: tuple[str, ...]) -> None:
        await self._enter()
        record = self._sessions.get(session_id)
        if record is None:
            raise StoredSessionNotFoundError(session_id)
        self._sessions[session_id] = replace(record, additional_directories=tuple(directories))

    async def set_system_prompt(self, session_id: str, prompt: ClientPrompt | None) -> None:
        await self._enter()
        record = self._sessions.get(session_id)
        if record is None:
            raise StoredSessionNotFoundError(session_id)
        self._sessions[session_id] = replace(record, system_prompt=prompt)

    async def set_title(self, session_id: str, title: str) -> None:
        await self._enter()
        record = self._sessions.get(session_id)
        if record is None:
            raise StoredSessionNotFoundError(session_id)
        self._sessions[session_id] = replace(record, title=title)

    # -- turns -----------------------------------------------------------------------------------------------

    async def begin_turn(
        self, session_id: str, *, known: int, content: str, parts: tuple[PromptPart, ...], title: str
    ) -> TurnTicket:
        await self._enter()
        rows = self._rows.get(session_id)
        if rows is None:
            raise StoredSessionNotFoundError(session_id)
        self._refuse_running(session_id, _pending(rows))
        for row in rows:
            if row.message.outcome == "running":
                row.message, row.owner = replace(row.message, outcome="interrupted"), None
        last = len(rows)
        since = known if known <= last else 0
        catch_up = tuple(row.message for row in rows[since:])
        rows.append(_Row(StoredMessage(last + 1, "user", content, parts=parts)))
        rows.append(_Row(StoredMessage(last + 2, "assistant", "", outcome="running"), self.owner))
        self._touch(session_id, self._tick(), title)
        self._live.add((session_id, last + 2))
        title, compaction = self._sessions[session_id].title, self._compactions.get(session_id)
        return TurnTicket(session_id, last + 1, last + 2, catch_up, since, title, compaction)

    async def end_turn(
        self,
        ticket: TurnTicket,
        *,
        content: str,
        reasoning: str,
        stop_reason: StopReason | None,
        outcome: FinalOutcome,
        steps: tuple[ModelStep, ...] = (),
        usage: ContextUsage | None = None,
    ) -> None:
        try:
            await self._enter()
            row = self._own_pending(ticket)
            row.message = StoredMessage(
                ticket.answer_seq, "assistant", content, reasoning, (), stop_reason, outcome, steps, usage
            )
            row.owner = None
            self._touch(ticket.session_id, self._tick())
        finally:
            self._live.discard((ticket.session_id, ticket.answer_seq))

    async def record_steps(self, ticket: TurnTicket, steps: tuple[ModelStep, ...]) -> None:
        await self._enter()
        row = self._own_pending(ticket)
        if (ticket.session_id, ticket.answer_seq) not in self._live:  # its end_turn was called (and failed)
            raise StoreIOError(self.location, f"the answer {ticket.answer_seq} is no longer pending")
        row.message = replace(row.message, steps=steps)

    async def record_rewind(self, session_id: str, rewind: Rewind) -> None:
        await self._enter()
        if session_id not in self._sessions:
            raise StoredSessionNotFoundError(session_id)
        kept = tuple(r for r in self._rewinds.get(session_id, ()) if r.through != rewind.through)
        self._rewinds[session_id] = (*kept, rewind)

    async def record_compaction(self, session_id: str, compaction: Compaction) -> None:
        await self._enter()
        rows = self._rows.get(session_id)
        if rows is None:
            raise StoredSessionNotFoundError(session_id)
        through, latest = compaction.through, self._compactions.get(session_id)
        if through < 2 or through % 2 or len(rows) < through or (latest is not None and latest.through >= through):
            detail = f"a compaction of messages 1..{through} does not fit session {session_id}"
            raise StoreIOError(self.location, detail)
        self._compactions[session_id] = compaction

    def _own_pending(self, ticket: TurnTicket) -> _Row:
        """The answer row of a turn this store is running; :class:`StoreIOError` if it is no longer pending here."""
        rows = self._rows.get(ticket.session_id)
        if rows is None:
            raise StoredSessionNotFoundError(ticket.session_id)
        row = rows[ticket.answer_seq - 1] if 0 < ticket.answer_seq <= len(rows) else None
        if row is None or row.message.outcome != "running" or row.owner != self.owner:
            raise StoreIOError(self.location, f"the answer {ticket.answer_seq} is no longer pending")
        return row
