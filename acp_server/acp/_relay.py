"""A live turn event as this connection's client is told it: the ACP 1.25 update where the client advertised its
capability (``notice``, ``compaction_update``, ``plan_update`` / ``plan_removed``), else what it was told before."""

from __future__ import annotations

from typing import Any

from ..domain import Compacted, Compacting, CompactionStopped, Notice, PlanUpdated, RetryNotice, TurnEvent
from ._convert import compaction_update, notice_update, plan_id_of, plan_update, update_from_event
from ._editor import ClientCapabilities

__all__ = ["live_update"]


def live_update(session_id: str, event: TurnEvent, caps: ClientCapabilities) -> dict[str, Any] | None:
    """The ``session/update`` params of ``event`` for a client with ``caps`` (None: it is not told). A notice goes
    only to a client that shows notices; a compaction that failed or was cancelled is told to others only when it
    has a note (a summary thrown away), as before."""
    if isinstance(event, Notice | RetryNotice) and caps.notices:
        return {"sessionId": session_id, "update": notice_update(event)}
    if isinstance(event, Notice):
        return None
    if isinstance(event, PlanUpdated) and caps.plan:
        return {"sessionId": session_id, "update": plan_update(event.entries, plan_id_of(session_id))}
    if isinstance(event, Compacting | Compacted | CompactionStopped) and caps.compaction:
        return compaction_update(session_id, event)
    if isinstance(event, CompactionStopped) and not event.note:
        return None
    return update_from_event(session_id, event)
