"""The turn's final error: one :class:`ModelTurnError` per kind of failure, chosen by a table.

The key is the pipeline's own failure when it is one (its watchdog's, a cut or an unusable stream), else the
retry classification's kind; each entry builds its error from one shared :class:`Failure`. Invariants: every
message names the endpoint and model it concerns, and the details carry them as ``endpoint`` / ``model``;
provider text is quoted with the secrets redacted; a failure with no entry is not a model failure (None: the
caller lets the original propagate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypedDict, cast

from ..provider import missing_version_hint, public_endpoint
from ..retry_after import retry_after_from_headers
from ._classify import RetryClassification
from ._exceptions import (
    ModelHTTPError,
    ModelProviderError,
    ModelRateLimitedError,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    ModelTurnError,
    Phase,
    StreamContentError,
    StreamInactivityTimeoutError,
    StreamLifetimeExceededError,
    StreamTimeoutError,
    StreamTruncatedError,
    ms_text,
    redact,
)
from ._types import ChatRequest

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["Failure", "Target", "final_error", "retry_after_of", "target_of"]


@dataclass(frozen=True, slots=True)
class Target:
    """What a turn asked: the endpoint (``scheme://host:port/path``, never credentials) and the model."""

    endpoint: str
    model: str

    @property
    def named(self) -> str:
        return f"{self.endpoint} (model {self.model!r})"


def target_of(client: AsyncOpenAI, request: ChatRequest) -> Target:
    base_url = getattr(client, "base_url", None)
    return Target(public_endpoint(None if base_url is None else str(base_url)), request.model)


def retry_after_of(exc: BaseException) -> float | None:
    """The ``Retry-After`` of the response an SDK error carries, in seconds (None: no response, no header)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return retry_after_from_headers(headers) if headers is not None else None


class _Named(TypedDict):
    """The fields every final error carries the same way."""

    attempts: int
    endpoint: str
    model: str


@dataclass(frozen=True, slots=True)
class Failure:
    """Everything a final error is built from: the last attempt's failure and what the turn knows of itself.

    ``note`` says why a retryable failure was not retried, when that was not the budget.
    """

    exc: Exception
    classification: RetryClassification
    attempts: int
    chunks: int  # the last attempt's raw chunks
    phase: Phase  # the last attempt's phase
    secrets: tuple[str | None, ...]
    target: Target
    retry_after_s: float | None = None
    note: str = ""

    @property
    def named(self) -> _Named:
        return {"attempts": self.attempts, "endpoint": self.target.endpoint, "model": self.target.model}

    @property
    def tail(self) -> str:
        return self.note + ("" if self.attempts == 1 else f" (gave up after {self.attempts} attempts)")

    @property
    def retry_after_ms(self) -> float | None:
        return None if self.retry_after_s is None else self.retry_after_s * 1000

    def provider_message(self) -> str:
        message = getattr(self.exc, "message", None)
        return redact(message if isinstance(message, str) else str(self.exc), self.secrets)


_Key = Literal["lifetime", "stalled", "cut", "content", "rate_limit", "transport", "http", "provider"]

_TRANSPORT_HINTS: dict[str, str] = {
    "ECONNREFUSED": "nothing is listening there (is the server running, on that port?)",
    "ENOTFOUND": "its host name does not resolve (a typo in --base-url?)",
    "EAI_AGAIN": "its host name could not be resolved (DNS unavailable?)",
}


def _lifetime(f: Failure) -> ModelTurnError:
    exc = cast("StreamLifetimeExceededError", f.exc)  # the key says so
    return ModelStreamTimeoutError(
        f"The model stream from {f.target.named} exceeded its maximum lifetime of "
        f"{ms_text(exc.max_lifetime_ms)}ms (--stream-max-lifetime-ms){f.tail}",
        chunks_received=exc.chunks_received,
        phase=exc.phase,
        max_lifetime_ms=exc.max_lifetime_ms,
        **f.named,
    )


def _stalled(f: Failure) -> ModelTurnError:
    exc = cast("StreamTimeoutError", f.exc)
    return ModelStreamTimeoutError(
        f"The model stream from {f.target.named} stalled: {exc}{f.tail}",
        chunks_received=exc.chunks_received,
        phase=exc.phase,
        idle_ms=exc.idle_ms if isinstance(exc, StreamInactivityTimeoutError) else None,
        **f.named,
    )


def _cut(f: Failure) -> ModelTurnError:
    exc = cast("StreamTruncatedError", f.exc)
    return ModelTransportError(
        f"The model stream from {f.target.named} ended after {exc.chunks_received} chunk(s) without a finish "
        f"reason: the answer was cut (ECONNRESET){f.tail}",
        chunks_received=exc.chunks_received,
        retryable=True,
        phase="mid_stream",
        transport_code=exc.code,
        reason="eof_without_finish",
        **f.named,
    )


def _content(f: Failure) -> ModelTurnError:
    exc = cast("StreamContentError", f.exc)
    return ModelStreamContentError(
        f"{exc} (from {f.target.named}){f.tail}",
        chunks_received=f.chunks,
        retryable=exc.retryable,
        reason=exc.reason,
        content_type=exc.content_type,
        **f.named,
    )


def _rate_limited(f: Failure) -> ModelTurnError:
    return ModelRateLimitedError(
        f"The model endpoint {f.target.named} is rate limiting requests (HTTP 429): {f.provider_message()}{f.tail}",
        chunks_received=f.chunks,
        retry_after_ms=f.retry_after_ms,
        **f.named,
    )


def _transport(f: Failure) -> ModelTurnError:
    code = f.classification.transport_code
    hint = _TRANSPORT_HINTS.get(code or "")
    return ModelTransportError(
        f"The connection to the model endpoint {f.target.named} failed ({code}"
        f"{': ' + hint if hint else ''}): {f.provider_message()}{f.tail}",
        chunks_received=f.chunks,
        retryable=True,
        phase=f.phase,
        transport_code=code,
        status=f.classification.status,
        **f.named,
    )


def _http(f: Failure) -> ModelTurnError:
    classification = f.classification
    hint = missing_version_hint(f.target.endpoint) if classification.status == 404 else None
    if classification.reason.startswith("invalid request"):
        hint = "the server says the request is invalid: not retried"
    return ModelHTTPError(
        f"The model endpoint {f.target.named} answered HTTP {classification.status}: "
        f"{f.provider_message()}{'; ' + hint if hint else ''}{f.tail}",
        chunks_received=f.chunks,
        retryable=classification.diagnosis == "retryable",
        phase=f.phase,
        status=classification.status,
        retry_after_ms=f.retry_after_ms,
        **f.named,
    )


def _provider(f: Failure) -> ModelTurnError:
    return ModelProviderError(
        f"The model provider at {f.target.named} reported an error: {f.provider_message()}{f.tail}",
        chunks_received=f.chunks,
        retryable=False,
        phase=f.phase,
        status=f.classification.status,
        **f.named,
    )


_ERRORS: dict[_Key, Callable[[Failure], ModelTurnError]] = {
    "lifetime": _lifetime,
    "stalled": _stalled,
    "cut": _cut,
    "content": _content,
    "rate_limit": _rate_limited,
    "transport": _transport,
    "http": _http,
    "provider": _provider,
}


def _key_of(f: Failure) -> _Key | None:
    """The pipeline's own failure first (a watchdog timeout classifies as a transport error, a cut as a reset),
    then the classification's kind; any other error of the SDK is the provider's; anything else has no key."""
    exc = f.exc
    if isinstance(exc, StreamLifetimeExceededError):
        return "lifetime"
    if isinstance(exc, StreamTimeoutError):
        return "stalled"
    if isinstance(exc, StreamTruncatedError):
        return "cut"
    if isinstance(exc, StreamContentError):
        return "content"
    kind = f.classification.kind
    if kind == "rate_limit" or kind == "transport" or kind == "http":
        return kind
    import openai  # only reached on a failure; the SDK is already loaded by then

    return "provider" if isinstance(exc, openai.OpenAIError) else None


def final_error(failure: Failure) -> ModelTurnError | None:
    """The turn's error for a final failure (None: not a model failure, let it propagate as is)."""
    key = _key_of(failure)
    return None if key is None else _ERRORS[key](failure)
