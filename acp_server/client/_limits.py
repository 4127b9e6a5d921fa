"""The local per-session prompt limit (Q11–Q13): its validation (the daemon's, from :mod:`acp_server.limits`) and
the reservations counted against it.

A reservation is taken synchronously, before any byte of the prompt request is sent, and released exactly once
(:meth:`PromptSlot.release` is idempotent), whichever way the prompt ends. The daemon stays the authority (Q3);
this count only spares a request the daemon would refuse.
"""

from __future__ import annotations

from ..limits import validate_max_pending
from ._exceptions import DaemonPendingPromptLimitError

__all__ = ["PromptReservations", "PromptSlot", "validate_limit"]


def validate_limit(value: object, name: str = "max_pending_prompts_per_session") -> int | None:
    """The capability's value as a limit, by the daemon's rules (:func:`acp_server.limits.validate_max_pending`).

    ``None``, ``0`` and ``math.inf`` disable it (→ None); a positive integer (or an integral float) is the limit.
    Negative numbers, fractions, NaN, booleans and non-numbers raise ``ValueError`` naming the value.
    """
    return validate_max_pending(value, name)


class PromptSlot:
    """One reservation; gives itself back exactly once (later calls do nothing). Usable as a context manager."""

    __slots__ = ("_owner", "released", "session_id")

    def __init__(self, owner: PromptReservations, session_id: str) -> None:
        self._owner = owner
        self.session_id = session_id
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._owner._give_back(self.session_id)

    def __enter__(self) -> PromptSlot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<PromptSlot {self.session_id} {'released' if self.released else 'held'}>"


class PromptReservations:
    """Prompts in flight per session through one client (shared by its session clients)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def pending(self, session_id: str) -> int:
        return self._counts.get(session_id, 0)

    def reserve(self, session_id: str, limit: int | None) -> PromptSlot:
        """A slot, or :class:`DaemonPendingPromptLimitError` when ``limit`` slots are already held (never awaits)."""
        pending = self._counts.get(session_id, 0)
        if limit is not None and pending >= limit:
            raise DaemonPendingPromptLimitError(session_id, limit, pending)
        self._counts[session_id] = pending + 1
        return PromptSlot(self, session_id)

    def _give_back(self, session_id: str) -> None:
        pending = self._counts[session_id] - 1
        if pending:
            self._counts[session_id] = pending
        else:
            del self._counts[session_id]
