"""One session as the daemon publishes it: its event log, its permission desk, and the feed that turns the events
of the prompts accepted here into the log's frames, one prompt at a time, in admission order.

No task of its own: the oldest prompt's stream delivers to the log (``PromptStream.deliver_to``), so each event is
published in the task that sends it (the turn's), the instant it is sent; publishing never blocks. The prompts behind
it buffer their events (up to their stream's capacity, then their turn waits) until it has ended."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import partial

import anyio

from ...acp import update_from_event
from ...bridge import PromptHandle
from ...domain import Compacted, CompactionStopped, PromptEnded, PromptEvent, TextChunk, ThoughtChunk
from .._errors import turn_error_payload
from ._event_log import EventLog, update_event_name
from ._permissions import PermissionDesk

__all__ = ["SessionChannel"]


class SessionChannel:
    """One session as the daemon sees it: its event log, and the prompts accepted here whose events are not all
    published yet, in admission order: the first one's as they come, the next one's once it has ended."""

    def __init__(self, session_id: str, log: EventLog) -> None:
        self.session_id = session_id
        self.log = log
        self.permissions = PermissionDesk(session_id, log)
        self.pending: OrderedDict[str, PromptHandle] = OrderedDict()
        self._feeding: PromptHandle | None = None  # the prompt whose stream delivers to the log
        self._in_feed = False  # _feed runs (a prompt that ended as it was attached: its loop goes on)
        self._idle = anyio.Event()
        self._idle.set()

    def accept(self, handle: PromptHandle) -> None:
        """Queue the prompt's events for publication (at once if no earlier prompt's are still coming)."""
        self.pending[handle.prompt_id] = handle
        if self._idle.is_set():
            self._idle = anyio.Event()
        if self._feeding is None:
            self._feed()

    def _feed(self) -> None:
        """Have the oldest pending prompt's stream deliver to the log (what it buffered first), one after another
        while they have ended already."""
        self._in_feed = True
        try:
            while self.pending and self._feeding is None:
                handle = self._feeding = next(iter(self.pending.values()))
                handle.events.deliver_to(partial(self._deliver, handle, _TextData(self.session_id, handle.prompt_id)))
        finally:
            self._in_feed = False
        if not self.pending:
            self._idle.set()

    def _deliver(self, handle: PromptHandle, texts: _TextData, event: PromptEvent) -> None:
        """Publish one event of the prompt being fed; after its last, feed the next prompt's."""
        try:
            self._publish(handle, event, texts)
        finally:
            if isinstance(event, PromptEnded):
                handle.events.close()
                self.pending.pop(handle.prompt_id, None)
                self._feeding = None
                if not self._in_feed:
                    self._feed()

    async def drained(self) -> None:
        """Wait until every prompt accepted so far has had its terminal event published."""
        await self._idle.wait()

    def _publish(self, handle: PromptHandle, event: PromptEvent, texts: _TextData) -> None:
        if self.log.closed:
            return
        if isinstance(event, TextChunk):
            texts.for_message(event.message_id)
            self.log.publish_text("session_update", texts.message_key, event.text, texts.message)
        elif isinstance(event, ThoughtChunk):
            texts.for_thought(event.message_id)
            self.log.publish_text("session_update", texts.thought_key, event.text, texts.thought)
        elif isinstance(event, CompactionStopped) and not event.note:
            return  # a compaction that failed or was cancelled: the turn's outcome says it
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
    merges for a lagging subscriber (one key per prompt, kind and message: chunks of two messages never merge).
    ``message`` and ``thought`` are bound to the message they were made for (a merged frame is built later)."""

    __slots__ = (
        "message",
        "message_id",
        "message_key",
        "prompt_id",
        "session_id",
        "thought",
        "thought_id",
        "thought_key",
    )

    def __init__(self, session_id: str, prompt_id: str) -> None:
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.message_id = self.thought_id = ""
        self.message_key: tuple[str, str, str] = (prompt_id, "agent_message_chunk", "")
        self.thought_key: tuple[str, str, str] = (prompt_id, "agent_thought_chunk", "")
        self.message: Callable[[str], dict[str, object]] = partial(self._data, TextChunk, "")
        self.thought: Callable[[str], dict[str, object]] = partial(self._data, ThoughtChunk, "")

    def for_message(self, message_id: str) -> None:
        """The message chunks that follow belong to ``message_id``."""
        if message_id != self.message_id:
            self.message_id = message_id
            self.message_key = (self.prompt_id, "agent_message_chunk", message_id)
            self.message = partial(self._data, TextChunk, message_id)

    def for_thought(self, message_id: str) -> None:
        """The thought chunks that follow belong to ``message_id``."""
        if message_id != self.thought_id:
            self.thought_id = message_id
            self.thought_key = (self.prompt_id, "agent_thought_chunk", message_id)
            self.thought = partial(self._data, ThoughtChunk, message_id)

    def _data(self, kind: type[TextChunk | ThoughtChunk], message_id: str, text: str) -> dict[str, object]:
        return {"promptId": self.prompt_id, **update_from_event(self.session_id, kind(text, message_id=message_id))}
