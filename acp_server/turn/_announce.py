"""Tool calls shown while the model streams them, before their arguments are complete.

A slow model may stream a call's arguments for a minute (a ``write_file``'s content); the editor shows the call from
its first fragment on. Invariants:

- a call is announced (``ToolCallStarted``, ``pending``, title and kind from its tool's name) once, as soon as its
  name has streamed, with the id it keeps (:meth:`CallAssembler.claim_id`);
- while its arguments stream, it gets at most one ``ToolCallUpdated`` per :data:`UPDATE_INTERVAL_S` of the turn's
  clock: ``rawInput`` so far (a tolerant parse of the partial JSON; none past :data:`MAX_PARTIAL_BYTES`), and its
  location once a complete ``path`` inside the project is known; nothing that did not change is sent;
- once the call is handed over to run (:meth:`CallAnnouncer.take`) the announcer sends nothing more for it; a call
  announced but never run (the request failed, the prompt was cancelled) gets one final ``failed`` update from
  :meth:`CallAnnouncer.abandon`, so no call is left pending on the editor's screen.

Retries cannot replay these updates: a request is retried only while nothing of it was delivered.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import jiter

from ..domain import Emit, TextContent, ToolCallStarted, ToolCallUpdated, ToolLocation
from ..pipeline import ToolCallFragment
from ..tools.registry import ToolSet
from ._calls import CallAssembler, _without_lone_surrogates
from ._titles import tool_title

__all__ = ["MAX_PARTIAL_BYTES", "UPDATE_INTERVAL_S", "CallAnnouncer"]

logger = logging.getLogger("acp_server.turn")

UPDATE_INTERVAL_S = 0.25
"""The least time between two updates of one streaming call (at most four a second)."""

MAX_PARTIAL_BYTES = 32 * 1024
"""Arguments longer than this are not shown while they stream (the complete ones are, once the call is read)."""

ABANDON_TIMEOUT_S = 1.0
"""How long the final updates of calls that never ran may wait for the stream's reader (never blocking a cancel)."""


@dataclass(slots=True)
class _Shown:
    call_id: str
    updated_at: float
    raw_input: object = None
    located: bool = False


def _location(arguments: bytes, cwd: str, additional: tuple[str, ...] = ()) -> ToolLocation | None:
    """The file a call's arguments name once their ``path`` is complete, when it stays inside ``cwd`` or one of the
    ``additional`` directories (lexically: only shown; the call itself is confined when it is read)."""
    try:
        value = jiter.from_json(arguments, partial_mode=True, cache_mode="none")
    except ValueError:
        return None
    path = value.get("path") if isinstance(value, dict) else None
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    target = os.path.normpath(os.path.join(cwd, path))
    for root in map(os.path.normpath, (cwd, *additional)):
        if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
            return ToolLocation(target)
    return None


class CallAnnouncer:
    """Announces one turn's calls while they stream (see the module's invariants). ``seen``: the session's call ids,
    shared with the assembler's :meth:`CallAssembler.calls`."""

    __slots__ = ("_additional", "_by_index", "_cwd", "_emit", "_open", "_seen", "_tools")

    def __init__(
        self, emit: Emit, cwd: str, seen: set[str], tools: ToolSet, additional: tuple[str, ...] = ()
    ) -> None:
        self._emit = emit
        self._cwd = cwd
        self._additional = additional
        self._seen = seen
        self._tools = tools  # the session's: titles and kinds of its tools
        self._by_index: dict[int, _Shown] = {}  # the request being streamed
        self._open: dict[str, _Shown] = {}  # announced, not handed over to run yet

    async def fragments(self, calls: CallAssembler, fragments: Iterable[ToolCallFragment]) -> None:
        """After ``calls`` took ``fragments``: announce the calls whose name just arrived, update the others."""
        for index in dict.fromkeys(fragment.index for fragment in fragments):
            call = calls.pending(index)
            if call is None or not call.name:
                continue
            now = anyio.current_time()
            shown = self._by_index.get(index)
            if shown is None:
                shown = _Shown(calls.claim_id(index, self._seen), now)
                self._by_index[index] = self._open[shown.call_id] = shown
                tools = self._tools
                title, kind = tool_title(call.name, tools), tools.kind(call.name)
                await self._emit(ToolCallStarted(shown.call_id, title, kind, name=call.name))
            elif now - shown.updated_at >= UPDATE_INTERVAL_S and 0 < call.size <= MAX_PARTIAL_BYTES:
                update = self._progress(shown, "".join(call.arguments).encode("utf-8", "replace"))
                if update is not None:
                    shown.updated_at = now
                    await self._emit(update)

    def _progress(self, shown: _Shown, arguments: bytes) -> ToolCallUpdated | None:
        try:
            raw_input = _without_lone_surrogates(
                jiter.from_json(arguments, partial_mode="trailing-strings", cache_mode="none")
            )
        except ValueError:
            return None
        location = None if shown.located else _location(arguments, self._cwd, self._additional)
        if raw_input == shown.raw_input and location is None:
            return None
        shown.raw_input = raw_input
        shown.located = shown.located or location is not None
        return ToolCallUpdated(shown.call_id, raw_input=raw_input, locations=None if location is None else (location,))

    def next_request(self) -> None:
        """The next request's calls are new ones (their indexes start again)."""
        self._by_index.clear()

    def take(self, call_id: str) -> bool:
        """The call is about to run: nothing more is sent for it here. True if it was announced."""
        return self._open.pop(call_id, None) is not None

    async def abandon(self, cancelled: bool) -> None:
        """End every call announced but never run with one ``failed`` update (shielded and bounded: also while the
        prompt is being cancelled)."""
        shown, self._open = list(self._open), {}
        text = "Cancelled before it ran" if cancelled else "Not run: the turn ended before this call could run"
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + ABANDON_TIMEOUT_S
            for call_id in shown:
                try:
                    await self._emit(ToolCallUpdated(call_id, "failed", content=(TextContent(text),)))
                except Exception:  # never hides the turn's own error
                    logger.exception("could not end the tool call %s shown while it streamed", call_id)
