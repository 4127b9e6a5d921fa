"""Scripted behaviours: what the loopback model does with one ``POST /v1/chat/completions``.

Pure data (frozen dataclasses); ``_play.py`` performs them. "Chunk" means one ``chat.completion.chunk``
SSE event; chunks that carry text take it word by word from the answer derived from the prompt unless a
behaviour says otherwise. A behaviour that never ends on its own (silence, keep-alives) lasts until the client
disconnects or the model closes.

Tool-call behaviours stream ``delta.tool_calls`` as OpenAI does: per call, a first fragment with ``index``,
``id``, ``type`` and the function ``name`` (``arguments`` empty), then the ``arguments`` in pieces of at most
``fragment_size`` characters, each in its own chunk.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_FRAGMENT_SIZE = 16
"""Characters of ``arguments`` per tool-call fragment unless a behaviour says otherwise."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _check_usage(usage: tuple[int, int] | None) -> None:
    _require(usage is None or (len(usage) == 2 and min(usage) >= 0), "usage must be (prompt, completion) tokens >= 0")


@dataclass(frozen=True, slots=True)
class Answer:
    """A normal streamed answer: reasoning chunks, content chunks word by word, a finish chunk, ``[DONE]``.

    ``text`` / ``reasoning`` None = derived from the prompt / the default reasoning; ``""`` = no such chunks.
    ``chunk_delay_s`` is slept before every chunk (the finish chunk included), so N chunks end after N delays.
    ``finish_reason`` None sends no finish chunk (but still ``[DONE]``). A non-streaming request gets the same
    answer as one ``chat.completion`` body after the total delay. ``usage`` (prompt, completion tokens) replaces
    the counted usage (the prompt's words, the chunks sent) in the usage chunk a request asks for with
    ``stream_options.include_usage``.
    """

    text: str | None = None
    reasoning: str | None = None
    chunk_delay_s: float = 0.0
    finish_reason: str | None = "stop"
    usage: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        _require(self.chunk_delay_s >= 0, "chunk_delay_s must be >= 0")
        _check_usage(self.usage)


@dataclass(frozen=True, slots=True)
class HangAfterHeaders:
    """``200`` with SSE headers, then silence until the client disconnects."""


@dataclass(frozen=True, slots=True)
class ChunksThenSilent:
    """``k`` content chunks, then silence until the client disconnects."""

    k: int

    def __post_init__(self) -> None:
        _require(self.k >= 0, "k must be >= 0")


@dataclass(frozen=True, slots=True)
class KeepAliveOnly:
    """Only ``: keep-alive`` SSE comments, one after every ``interval_s``, until the client disconnects."""

    interval_s: float

    def __post_init__(self) -> None:
        _require(self.interval_s > 0, "interval_s must be > 0")


@dataclass(frozen=True, slots=True)
class SlowDrip:
    """``text`` word by word, one content chunk after each ``interval_s``, then a ``stop`` chunk, ``[DONE]``.

    It never ends early: a long ``text`` makes a stream that outlives any idle timer but not a lifetime cap.
    """

    interval_s: float
    text: str

    def __post_init__(self) -> None:
        _require(self.interval_s > 0, "interval_s must be > 0")


@dataclass(frozen=True, slots=True)
class RateLimited:
    """``429`` with an OpenAI error body; ``Retry-After: retry_after`` unless None."""

    retry_after: str | None = "1"


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    """An HTTP error ``status`` (400-599, default 500) with an OpenAI ``server_error`` body (its ``message``, or
    one naming the status).

    Not an exception: a behaviour, named apart from :class:`acp_server.errors.ServerError`.
    """

    status: int = 500
    message: str | None = None

    def __post_init__(self) -> None:
        _require(400 <= self.status <= 599, "status must be an HTTP error status (400-599)")


@dataclass(frozen=True, slots=True)
class ConnectionReset:
    """Abort the TCP connection (RST: ``SO_LINGER`` 0) after the request was read.

    ``after_chunks`` 0 aborts before any response byte; k > 0 sends SSE headers and k content chunks first.
    """

    after_chunks: int = 0

    def __post_init__(self) -> None:
        _require(self.after_chunks >= 0, "after_chunks must be >= 0")


@dataclass(frozen=True, slots=True)
class NonSSE:
    """``200`` with a complete non-SSE body (an HTML error page from a proxy, say)."""

    body: str = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    content_type: str = "text/html"


@dataclass(frozen=True, slots=True)
class EndWithoutFinish:
    """``k`` content chunks, then a clean end of the HTTP body: no finish chunk, no ``[DONE]``."""

    k: int

    def __post_init__(self) -> None:
        _require(self.k >= 0, "k must be >= 0")


@dataclass(frozen=True, slots=True)
class EmptyStream:
    """``200`` SSE with ``[DONE]`` at once and no chunk."""


@dataclass(frozen=True, slots=True)
class FinishThenHold:
    """``text`` word by word, then the finish chunk (and the usage chunk when asked for), then neither
    ``[DONE]`` nor the end of the body: the connection is held open until the client disconnects."""

    text: str = "complete answer"
    finish_reason: str = "stop"


@dataclass(frozen=True, slots=True)
class RawSSE:
    """``200`` SSE headers, then each of ``parts`` written to the body as is (a ``str`` is UTF-8 encoded), so a
    test can send what no well-behaved server would: JSON escapes of split surrogate pairs, invalid JSON, bytes
    that are not UTF-8. Parts starting with ``data:`` (other than ``[DONE]``) count as chunks.

    ``then``: ``"end"`` ends the body cleanly after the parts, ``"hold"`` keeps the connection open until the
    client disconnects, ``"reset"`` aborts it.
    """

    parts: tuple[str | bytes, ...]
    then: Literal["end", "hold", "reset"] = "end"

    def __post_init__(self) -> None:
        _require(all(isinstance(p, str | bytes) for p in self.parts), "parts must be str or bytes")
        _require(self.then in ("end", "hold", "reset"), "then must be 'end', 'hold' or 'reset'")


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One tool call a behaviour streams: not a behaviour itself, a part of :class:`ToolCalls`.

    ``arguments``: a ``str`` is sent as is (so malformed JSON can be scripted), a mapping as its JSON. ``id``
    None = ``call_loopback_<request index>_<position>``. The name is sent as given, known tool or not.
    """

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None

    def __post_init__(self) -> None:
        _require(isinstance(self.name, str), "name must be a str")
        _require(isinstance(self.arguments, str | Mapping), "arguments must be a str or a mapping")
        _require(self.id is None or isinstance(self.id, str), "id must be a str or None")

    @property
    def arguments_text(self) -> str:
        """The ``arguments`` string as the wire carries it."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)


def _check_calls(calls: tuple[ScriptedCall, ...], fragment_size: int | None) -> None:
    _require(isinstance(calls, tuple), "calls must be a tuple")
    _require(all(isinstance(c, ScriptedCall) for c in calls), "calls must be ScriptedCall values")
    _require(fragment_size is None or fragment_size >= 1, "fragment_size must be >= 1 or None")


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """An answer that calls tools: ``text`` word by word (``""`` = none), then each call's fragments, then the
    finish chunk (``finish_reason``, None = none), ``[DONE]``.

    Several calls are parallel calls (indices 0, 1, ...), streamed one after the other, or round-robin with
    ``interleave``. ``fragment_size`` None sends each call whole in one fragment (as some OpenAI-compatible
    servers do). A non-streaming request gets one ``chat.completion`` whose message has ``tool_calls``. ``usage``
    as for :class:`Answer`. ``fragment_delay_s`` is slept before each tool-call fragment (a slow local model).
    """

    calls: tuple[ScriptedCall, ...]
    text: str = ""
    fragment_size: int | None = DEFAULT_FRAGMENT_SIZE
    interleave: bool = False
    finish_reason: str | None = "tool_calls"
    usage: tuple[int, int] | None = None
    fragment_delay_s: float = 0.0

    def __post_init__(self) -> None:
        _check_calls(self.calls, self.fragment_size)
        _check_usage(self.usage)
        _require(self.fragment_delay_s >= 0, "fragment_delay_s must be >= 0")


@dataclass(frozen=True, slots=True)
class PartialToolCalls:
    """The first ``fragments`` tool-call chunks :class:`ToolCalls` would send for ``calls``, no finish, then:
    ``"hold"`` silence until the client disconnects, ``"end"`` a clean end of the body, ``"reset"`` an abort.

    For the no-blind-replay rule: a fragment reached the caller, so the request must not be silently retried.
    """

    calls: tuple[ScriptedCall, ...]
    fragments: int = 1
    then: Literal["hold", "end", "reset"] = "hold"
    fragment_size: int | None = DEFAULT_FRAGMENT_SIZE

    def __post_init__(self) -> None:
        _check_calls(self.calls, self.fragment_size)
        _require(bool(self.calls), "calls must not be empty")
        _require(self.fragments >= 1, "fragments must be >= 1")
        _require(self.then in ("hold", "end", "reset"), "then must be 'hold', 'end' or 'reset'")


Behaviour = (
    Answer
    | HangAfterHeaders
    | ChunksThenSilent
    | KeepAliveOnly
    | SlowDrip
    | RateLimited
    | ErrorStatus
    | ConnectionReset
    | NonSSE
    | EndWithoutFinish
    | EmptyStream
    | FinishThenHold
    | RawSSE
    | ToolCalls
    | PartialToolCalls
)
"""Any scripted behaviour."""
