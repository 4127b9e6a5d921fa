"""Errors of the streaming pipeline, in one module.

    ServerError
     └── PipelineError                    root of this layer
          ├── StreamTimeoutError          code "ETIMEDOUT": *we closed* one attempt's stream (watchdog)
          │    ├── StreamInactivityTimeoutError   no raw chunk for ``idle_ms``
          │    └── StreamLifetimeExceededError    the stream outlived ``max_lifetime_ms``
          ├── StreamTruncatedError        code "ECONNRESET": one attempt's stream ended (EOF, or [DONE])
          │                               after chunks but before any finish_reason: a cut answer
          ├── StreamContentError          one attempt's response was unusable: empty, not SSE at all, a
          │                               data line that is not JSON (or not UTF-8), or not a chunk
          └── ModelTurnError              raised by ``stream_chat`` once no permitted attempt is left
               ├── ModelStreamTimeoutError    model_stream_timeout   the last attempt hit the watchdog
               ├── ModelTransportError        model_transport_error  the peer or the network *broke* it,
               │                                                      or the stream was cut (no finish_reason)
               ├── ModelRateLimitedError      model_rate_limited     HTTP 429
               ├── ModelHTTPError             model_http_error       any other HTTP error status
               ├── ModelStreamContentError    model_stream_content   see StreamContentError
               └── ModelProviderError         model_provider_error   an error event inside the stream, or an
                                                                      SDK error nothing else explains

Per-attempt errors (``StreamTimeoutError``, ``StreamContentError``) are what the retry policies look at; the
``ModelTurnError`` family is the turn's outcome, built once in ``_stream.py`` from the last attempt's error
(kept as ``__cause__``). ``details()`` are camelCase and JSON-only; optional keys are omitted when unknown.

Invariant: no message or detail ever contains the API key or an ``Authorization`` header, nor a lone surrogate:
messages are built from our own text plus provider text passed through :func:`redact`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, Literal, TypeAlias, TypedDict, Unpack

from ..errors import ServerError
from ._text import clean_text

__all__ = [
    "ModelHTTPError",
    "ModelProviderError",
    "ModelRateLimitedError",
    "ModelStreamContentError",
    "ModelStreamTimeoutError",
    "ModelTransportError",
    "ModelTurnError",
    "Phase",
    "PipelineError",
    "StreamContentError",
    "StreamContentReason",
    "StreamInactivityTimeoutError",
    "StreamLifetimeExceededError",
    "StreamPhase",
    "StreamTimeoutError",
    "StreamTruncatedError",
    "TransportReason",
    "ms_text",
    "redact",
]

StreamPhase: TypeAlias = Literal["before_first_chunk", "mid_stream"]
"""Where a stream stopped: before any raw chunk arrived (headers wait included), or after at least one."""

Phase: TypeAlias = Literal["request", "before_first_chunk", "mid_stream"]
"""``StreamPhase`` plus ``request``: the request failed before a response stream existed (status, connect)."""

StreamContentReason: TypeAlias = Literal[
    "empty_stream", "no_finish_no_content", "non_sse", "invalid_json", "invalid_chunk"
]
"""Why a stream was unusable. ``no_finish_no_content`` is no longer raised (a stream that ends after chunks but
without a finish reason is a cut stream, :class:`StreamTruncatedError`); it stays a valid value on the wire."""

TransportReason: TypeAlias = Literal["eof_without_finish"]
"""A transport error that is not the network's: the stream ended before the model said it had finished."""

_MAX_QUOTE = 300


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every non-trivial secret replaced by ``***``, cut to a readable length, lone surrogates
    replaced (provider text may carry them)."""
    text = clean_text(text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 1] + "…"


def ms_text(value: float) -> str:
    """Milliseconds as written in messages: ``200``, ``1.5``."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}".rstrip("0")


class PipelineError(ServerError):
    """Root of the pipeline's errors."""

    error_kind: ClassVar[str] = "model_error"


class StreamTimeoutError(PipelineError):
    """The watchdog closed a stream; ``code`` makes it classify as a transport timeout (a read timeout)."""

    error_kind: ClassVar[str] = "model_stream_timeout"
    code: ClassVar[str] = "ETIMEDOUT"
    retryable = True

    def __init__(self, message: str, *, chunks_received: int, stream_lifetime_ms: float) -> None:
        super().__init__(message)
        self.chunks_received = chunks_received
        self.stream_lifetime_ms = stream_lifetime_ms

    @property
    def phase(self) -> StreamPhase:
        return "mid_stream" if self.chunks_received else "before_first_chunk"

    def details(self) -> Mapping[str, object]:
        return {
            "transportCode": self.code,
            "phase": self.phase,
            "chunksReceived": self.chunks_received,
            "streamLifetimeMs": round(self.stream_lifetime_ms),
        }


class StreamInactivityTimeoutError(StreamTimeoutError):
    """No raw chunk (reasoning included) for ``idle_ms``: the request was closed (W3)."""

    def __init__(self, idle_ms: float, chunks_received: int, stream_lifetime_ms: float) -> None:
        super().__init__(
            f"No stream activity for {ms_text(idle_ms)}ms (inactivity timeout)",
            chunks_received=chunks_received,
            stream_lifetime_ms=stream_lifetime_ms,
        )
        self.idle_ms = idle_ms

    def details(self) -> Mapping[str, object]:
        return {**super().details(), "idleMs": self.idle_ms}


class StreamLifetimeExceededError(StreamTimeoutError):
    """The stream was still going after ``max_lifetime_ms`` (a drip-fed stream defeats the idle timer)."""

    def __init__(self, max_lifetime_ms: float, chunks_received: int, stream_lifetime_ms: float) -> None:
        super().__init__(
            f"Stream exceeded its maximum lifetime of {ms_text(max_lifetime_ms)}ms",
            chunks_received=chunks_received,
            stream_lifetime_ms=stream_lifetime_ms,
        )
        self.max_lifetime_ms = max_lifetime_ms

    def details(self) -> Mapping[str, object]:
        return {**super().details(), "maxLifetimeMs": self.max_lifetime_ms}


class StreamTruncatedError(PipelineError):
    """One attempt's stream ended after ``chunks_received`` chunks without a finish reason: the answer was cut.

    ``code`` makes it classify as a reset (ECONNRESET): retried like one while nothing reached the caller (W9).
    """

    error_kind: ClassVar[str] = "model_transport_error"
    code: ClassVar[str] = "ECONNRESET"
    retryable = True

    def __init__(self, chunks_received: int) -> None:
        super().__init__(
            f"The model stream ended after {chunks_received} chunk(s) without a finish reason (the answer was cut)"
        )
        self.chunks_received = chunks_received

    def details(self) -> Mapping[str, object]:
        return {
            "transportCode": self.code,
            "phase": "mid_stream",
            "chunksReceived": self.chunks_received,
            "reason": "eof_without_finish",
        }


class StreamContentError(PipelineError):
    """One attempt's response ended without a usable answer.

    ``empty_stream`` (no chunk at all), ``invalid_json`` (a ``data:`` line that is not JSON, or not UTF-8) and
    ``invalid_chunk`` (JSON that is not a ``chat.completion.chunk``) are retryable (content retry, only while
    nothing reached the caller); ``non_sse`` (the endpoint answered 200 with something that is not
    ``text/event-stream``) is not.
    """

    error_kind: ClassVar[str] = "model_stream_content"

    def __init__(
        self,
        message: str,
        *,
        reason: StreamContentReason,
        chunks_received: int = 0,
        content_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason: StreamContentReason = reason
        self.chunks_received = chunks_received
        self.content_type = content_type
        self.retryable = reason != "non_sse"

    def details(self) -> Mapping[str, object]:
        out: dict[str, object] = {"reason": self.reason, "chunksReceived": self.chunks_received}
        if self.content_type is not None:
            out["contentType"] = self.content_type
        return out


class _TurnErrorCounts(TypedDict):
    attempts: int
    chunks_received: int
    retryable: bool


class TurnErrorFields(_TurnErrorCounts, total=False):
    """The keyword arguments every :class:`ModelTurnError` takes (subclasses with nothing fixed pass them on)."""

    phase: Phase | None
    transport_code: str | None
    status: int | None
    endpoint: str | None
    model: str | None


class ModelTurnError(PipelineError):
    """The turn's model request failed for good: no permitted attempt is left, or retrying cannot help.

    ``attempts`` counts the HTTP requests made (1 = no retry); ``chunks_received`` and ``phase`` describe the
    last one. ``endpoint`` (``scheme://host:port/path``, never credentials) and ``model`` say what was asked.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        chunks_received: int,
        retryable: bool,
        phase: Phase | None = None,
        transport_code: str | None = None,
        status: int | None = None,
        endpoint: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.model = model
        self.attempts = attempts
        self.chunks_received = chunks_received
        self.retryable = retryable
        self.phase: Phase | None = phase
        self.transport_code = transport_code
        self.status = status

    def details(self) -> Mapping[str, object]:
        out: dict[str, object] = {}
        if self.transport_code is not None:
            out["transportCode"] = self.transport_code
        if self.status is not None:
            out["status"] = self.status
        if self.phase is not None:
            out["phase"] = self.phase
        out["attempts"] = self.attempts
        out["chunksReceived"] = self.chunks_received
        out["retryable"] = self.retryable
        if self.endpoint is not None:
            out["endpoint"] = self.endpoint
        if self.model is not None:
            out["model"] = self.model
        return out


class ModelStreamTimeoutError(ModelTurnError):
    """The last attempt's stream stalled (``idle_ms``) or outlived its cap (``max_lifetime_ms``) and was closed by
    the watchdog."""

    error_kind: ClassVar[str] = "model_stream_timeout"

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        chunks_received: int,
        phase: Phase,
        idle_ms: float | None = None,
        max_lifetime_ms: float | None = None,
        endpoint: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(
            message,
            attempts=attempts,
            chunks_received=chunks_received,
            retryable=True,
            phase=phase,
            transport_code="ETIMEDOUT",
            endpoint=endpoint,
            model=model,
        )
        self.idle_ms = idle_ms
        self.max_lifetime_ms = max_lifetime_ms

    def details(self) -> Mapping[str, object]:
        out = dict(super().details())
        if self.idle_ms is not None:
            out["idleMs"] = self.idle_ms
        if self.max_lifetime_ms is not None:
            out["maxLifetimeMs"] = self.max_lifetime_ms
        return out


class ModelTransportError(ModelTurnError):
    """The connection failed or broke; ``transport_code`` says how (ECONNRESET, ECONNREFUSED, ...).

    ``reason`` ``eof_without_finish``: the stream ended (``mid_stream``) before the model sent a finish reason.
    """

    error_kind: ClassVar[str] = "model_transport_error"

    def __init__(
        self,
        message: str,
        *,
        reason: TransportReason | None = None,
        **fields: Unpack[TurnErrorFields],
    ) -> None:
        super().__init__(message, **fields)
        self.reason: TransportReason | None = reason

    def details(self) -> Mapping[str, object]:
        out = dict(super().details())
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class ModelRateLimitedError(ModelTurnError):
    """The endpoint kept answering 429; ``retry_after_ms`` is its last ``Retry-After`` as the provider gave it
    (not capped: also when it was too long to wait for, or would have ended after the caller's deadline)."""

    error_kind: ClassVar[str] = "model_rate_limited"

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        chunks_received: int = 0,
        retry_after_ms: float | None = None,
        endpoint: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(
            message,
            attempts=attempts,
            chunks_received=chunks_received,
            retryable=True,
            phase="request",
            status=429,
            endpoint=endpoint,
            model=model,
        )
        self.retry_after_ms = retry_after_ms

    def details(self) -> Mapping[str, object]:
        out = dict(super().details())
        if self.retry_after_ms is not None:
            out["retryAfterMs"] = round(self.retry_after_ms)
        return out


class ModelHTTPError(ModelTurnError):
    """The endpoint answered an HTTP error status; 401/403 and other 4xx are not retryable, 5xx are.

    ``retry_after_ms``: the response's ``Retry-After`` as the provider gave it, if any (a 503 may send one).
    """

    error_kind: ClassVar[str] = "model_http_error"

    def __init__(
        self,
        message: str,
        *,
        retry_after_ms: float | None = None,
        **fields: Unpack[TurnErrorFields],
    ) -> None:
        super().__init__(message, **fields)
        self.retry_after_ms = retry_after_ms

    def details(self) -> Mapping[str, object]:
        out = dict(super().details())
        if self.retry_after_ms is not None:
            out["retryAfterMs"] = round(self.retry_after_ms)
        return out


class ModelStreamContentError(ModelTurnError):
    """No usable stream: not SSE (first bytes quoted), or empty / answerless after the retries."""

    error_kind: ClassVar[str] = "model_stream_content"

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        chunks_received: int,
        retryable: bool,
        reason: StreamContentReason,
        content_type: str | None = None,
        endpoint: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(
            message,
            attempts=attempts,
            chunks_received=chunks_received,
            retryable=retryable,
            phase="mid_stream" if chunks_received else "before_first_chunk",
            endpoint=endpoint,
            model=model,
        )
        self.reason: StreamContentReason = reason
        self.content_type = content_type

    def details(self) -> Mapping[str, object]:
        out = dict(super().details())
        out["reason"] = self.reason
        if self.content_type is not None:
            out["contentType"] = self.content_type
        return out


class ModelProviderError(ModelTurnError):
    """The provider reported an error no other kind describes (e.g. an ``error`` event inside the stream)."""

    error_kind: ClassVar[str] = "model_provider_error"
