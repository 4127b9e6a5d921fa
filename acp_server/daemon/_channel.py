"""One session as the daemon publishes it: its event log, its permission desk, and the pump that turns the events
of the prompts accepted here into the log's frames, one prompt at a time, in admission order."""

from __future__ import annotations

from collections import OrderedDict

import anyio
from anyio.abc import TaskGroup

from ..acp import update_from_event
from ..bridge import PromptHandle
from ..domain import Compacted, PromptEnded, PromptEvent, TextChunk, ThoughtChunk
from ._errors import turn_error_payload
from ._events import EventLog, update_event_name
from ._permissions import PermissionDesk

__all__ = ["SessionChannel"]


class SessionChannel:
    """One session as the daemon sees it: its event log, and the prompts accepted here whose events are not all
    published yet, in admission order. Their events are published by :meth:`pump`, one task at a time."""

    def __init__(self, session_id: str, log: EventLog) -> None:
        self.session_id = session_id
        self.log = log
        self.permissions = PermissionDesk(session_id, log)
        self.pending: OrderedDict[str, PromptHandle] = OrderedDict()
        self._pumping = False
        self._idle = anyio.Event()
        self._idle.set()

    def accept(self, handle: PromptHandle, tg: TaskGroup) -> None:
        """Queue the prompt's events for publication; start the pump if none runs."""
        self.pending[handle.prompt_id] = handle
        if not self._pumping:
            self._pumping = True
            self._idle = anyio.Event()
            tg.start_soon(self.pump, name=f"daemon pump {self.session_id}")

    async def pump(self) -> None:
        """Publish each pending prompt's events, to its end, in admission order; stop when none is left."""
        try:
            while self.pending:
                handle = next(iter(self.pending.values()))
                texts = _TextData(self.session_id, handle.prompt_id)
                try:
                    async for event in handle.events:
                        self._publish(handle, event, texts)
                finally:
                    handle.events.close()
                    self.pending.pop(handle.prompt_id, None)
        finally:
            self._pumping = False
            self._idle.set()

    async def drained(self) -> None:
        """Wait until every prompt accepted so far has had its terminal event published."""
        await self._idle.wait()

    def _publish(self, handle: PromptHandle, event: PromptEvent, texts: _TextData) -> None:
        if self.log.closed:
            return
        if isinstance(event, TextChunk):
            self.log.publish_text("session_update", texts.message_key, event.text, texts.message)
        elif isinstance(event, ThoughtChunk):
            self.log.publish_text("session_update", texts.thought_key, event.text, texts.thought)
        elif not isinstance(event, PromptEnded):
            update = update_from_event(self.session_id, event)
            name = update_event_name(event)
            self.log.publish(name, {"promptId": handle.prompt_id, **update})
            if isinstance(event, Compacted):  # after its note: subscribers are told a compaction happened
                self.log.publish("context_compacted", _compacted(self.session_id, handle.prompt_id, event))
        elif event.error is not None:
            base = {"sessionId": self.session_id, "promptId": handle.prompt_id}
            self.log.publish("turn_error", {**base, **turn_error_payload(event.error)})
        else:
            base = {"sessionId": self.session_id, "promptId": handle.prompt_id}
            self.log.publish("turn_complete", {**base, "stopReason": event.stop_reason})


def _compacted(session_id: str, prompt_id: str, event: Compacted) -> dict[str, object]:
    """The ``context_compacted`` event's data."""
    data: dict[str, object] = {"sessionId": session_id, "promptId": prompt_id, "through": event.through}
    data["estimatedTokens"] = event.estimate
    if event.size is not None:
        data["contextWindow"] = event.size
    return data


class _TextData:
    """The ``session_update`` data of one prompt's message and thought chunks, for any text: what the event log
    merges for a lagging subscriber (one key per prompt and kind)."""

    __slots__ = ("message_key", "prompt_id", "session_id", "thought_key")

    def __init__(self, session_id: str, prompt_id: str) -> None:
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.message_key = (prompt_id, "agent_message_chunk")
        self.thought_key = (prompt_id, "agent_thought_chunk")

    def message(self, text: str) -> dict[str, object]:
        return {"promptId": self.prompt_id, **update_from_event(self.session_id, TextChunk(text))}

    def thought(self, text: str) -> dict[str, object]:
        return {"promptId": self.prompt_id, **update_from_event(self.session_id, ThoughtChunk(text))}
