"""Scripted behaviours: what the loopback model does with one ``POST /v1/chat/completions``.

Pure data (frozen dataclasses); ``_play.py`` performs them. "Chunk" means one ``chat.completion.chunk``
SSE event; chunks that carry text take it word by word from the answer derived from the prompt unless a
behaviour says otherwise. A behaviour that never ends on its own (silence, keep-alives) lasts until the client
disconnects or the model closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True, slots=True)
class Answer:
    """A normal streamed answer: reasoning chunks, content chunks word by word, a finish chunk, ``[DONE]``.

    ``text`` / ``reasoning`` None = derived from the prompt / the default reasoning; ``""`` = no such chunks.
    ``chunk_delay_s`` is slept before every chunk (the finish chunk included), so N chunks end after N delays.
    ``finish_reason`` None sends no finish chunk (but still ``[DONE]``). A non-streaming request gets the same
    answer as one ``chat.completion`` body after the total delay.
    """

    text: str | None = None
    reasoning: str | None = None
    chunk_delay_s: float = 0.0
    finish_reason: str | None = "stop"

    def __post_init__(self) -> None:
        _require(self.chunk_delay_s >= 0, "chunk_delay_s must be >= 0")


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
    """An HTTP error ``status`` (400-599, default 500) with an OpenAI ``server_error`` body.

    Not an exception: a behaviour, named apart from :class:`acp_server.errors.ServerError`.
    """

    status: int = 500

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
)
"""Any scripted behaviour."""
