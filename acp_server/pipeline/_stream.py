"""Execute one streamed chat request, guarded and retried, and yield its deltas.

One *turn* = up to a few *attempts* (HTTP requests). Each attempt runs under the watchdog (``_watchdog.py``)
in its own per-request cancel scope, a child of the caller's; failures are classified (``_classify.py``) and
retried or not by the policies (``_retry.py``). This module is the one place where openai / httpx2 failures
become pipeline errors (the ``ModelTurnError`` family, the original kept as ``__cause__``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio

from ..provider import missing_version_hint, public_endpoint
from ..retry_after import retry_after_from_headers
from ._classify import RetryClassification, classify_retry_error
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
    ms_text,
    redact,
)
from ._retry import RetryBudget, RetryDecision
from ._types import ChatRequest, Delta, Finished, RetryEvent, StreamEvent, StreamPolicy
from ._watchdog import ChunkStream, close_stream, guarded_stream

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["stream_chat"]

logger = logging.getLogger("acp_server.pipeline")

_PREVIEW_BYTES = 200
"""How much of a non-SSE body is quoted in the error."""


class _Attempt:
    """Progress of one attempt, as the turn-level error mapping needs it."""

    __slots__ = ("chunks", "content", "finish_reason", "opened", "yielded")

    def __init__(self) -> None:
        self.opened = False  # the response headers arrived (a stream object exists)
        self.chunks = 0  # raw chunks received
        self.yielded = 0  # events handed to the caller
        self.content = False  # some answer text was seen
        self.finish_reason: str | None = None

    @property
    def phase(self) -> Phase:
        if not self.opened:
            return "request"
        return "mid_stream" if self.chunks else "before_first_chunk"


def _is_sse(content_type: str | None) -> bool:
    # A missing content type is tolerated (some local servers omit it); a present, different one is not.
    return content_type is None or content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


async def _first_bytes(response: Any, limit: int) -> bytes:
    buffer = b""
    async with aclosing(response.aiter_raw()) as raw:
        async for piece in raw:
            buffer += piece
            if len(buffer) >= limit:
                break
    return buffer[:limit]


async def _open(
    client: AsyncOpenAI,
    request: ChatRequest,
    attempt: _Attempt,
    secrets: tuple[str | None, ...],
    close_s: float,
) -> ChunkStream[Any]:
    """The SDK call up to the response headers; a 200 that is not SSE is a non-retryable content error."""
    stream = cast(
        "ChunkStream[Any]",
        await client.chat.completions.create(
            model=request.model, messages=cast(Any, request.messages), stream=True, **request.extra
        ),
    )
    attempt.opened = True
    response = getattr(stream, "response", None)
    headers: Mapping[str, str] | None = getattr(response, "headers", None)
    content_type = headers.get("content-type") if headers is not None else None
    if _is_sse(content_type):
        return stream
    try:
        preview = await _first_bytes(response, _PREVIEW_BYTES)
    except Exception:
        preview = b""
    finally:
        await close_stream(stream, close_s)
    quoted = redact(preview.decode("utf-8", "replace"), secrets)
    raise StreamContentError(
        f"The model endpoint answered {content_type!r} instead of an SSE stream; first bytes: {quoted!r}",
        reason="non_sse",
        content_type=content_type,
    )


def _delta_of(choice: Any) -> Delta | None:
    """The text and reasoning of one choice's delta (``reasoning_content`` or ``reasoning``), if any."""
    delta = choice.delta
    if delta is None:
        return None
    text = delta.content or ""
    reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
    if not isinstance(reasoning, str):
        reasoning = ""
    return Delta(text=text, reasoning=reasoning) if text or reasoning else None


def _without_sdk_retries(client: AsyncOpenAI) -> AsyncOpenAI:
    """The pipeline is the only retry layer: the SDK's own retries off (a cheap copy sharing the pool)."""
    if getattr(client, "max_retries", 0):
        return client.with_options(max_retries=0)
    return client


def _attempts_text(attempts: int) -> str:
    return "" if attempts == 1 else f" (gave up after {attempts} attempts)"


def _provider_message(exc: BaseException, secrets: tuple[str | None, ...]) -> str:
    message = getattr(exc, "message", None)
    return redact(message if isinstance(message, str) else str(exc), secrets)


@dataclass(frozen=True, slots=True)
class _Target:
    """What a turn asked: the endpoint (``scheme://host:port/path``, never credentials) and the model."""

    endpoint: str
    model: str

    @property
    def named(self) -> str:
        return f"{self.endpoint} (model {self.model!r})"


def _target_of(client: AsyncOpenAI, request: ChatRequest) -> _Target:
    base_url = getattr(client, "base_url", None)
    return _Target(public_endpoint(None if base_url is None else str(base_url)), request.model)


_TRANSPORT_HINTS: dict[str, str] = {
    "ECONNREFUSED": "nothing is listening there (is the server running, on that port?)",
    "ENOTFOUND": "its host name does not resolve (a typo in --base-url?)",
    "EAI_AGAIN": "its host name could not be resolved (DNS unavailable?)",
}


def _final_error(
    exc: Exception,
    classification: RetryClassification,
    attempt: _Attempt,
    attempts: int,
    secrets: tuple[str | None, ...],
    retry_after_s: float | None,
    retry_after_cap_ms: float,
    target: _Target,
) -> ModelTurnError | None:
    """The turn's error for a final failure (None: not a model failure, let it propagate as is).

    Every message names the endpoint and model it concerns, and the details carry them as ``endpoint`` /
    ``model``.
    """
    tail = _attempts_text(attempts)
    if isinstance(exc, StreamLifetimeExceededError):
        return ModelStreamTimeoutError(
            f"The model stream from {target.named} exceeded its maximum lifetime of "
            f"{ms_text(exc.max_lifetime_ms)}ms (--stream-max-lifetime-ms){tail}",
            attempts=attempts,
            chunks_received=exc.chunks_received,
            phase=exc.phase,
            max_lifetime_ms=exc.max_lifetime_ms,
            endpoint=target.endpoint,
            model=target.model,
        )
    if isinstance(exc, StreamTimeoutError):
        return ModelStreamTimeoutError(
            f"The model stream from {target.named} stalled: {exc}{tail}",
            attempts=attempts,
            chunks_received=exc.chunks_received,
            phase=exc.phase,
            idle_ms=exc.idle_ms if isinstance(exc, StreamInactivityTimeoutError) else None,
            endpoint=target.endpoint,
            model=target.model,
        )
    if isinstance(exc, StreamContentError):
        return ModelStreamContentError(
            f"{exc} (from {target.named}){tail}",
            attempts=attempts,
            chunks_received=attempt.chunks,
            retryable=exc.retryable,
            reason=exc.reason,
            content_type=exc.content_type,
            endpoint=target.endpoint,
            model=target.model,
        )
    kind = classification.kind
    if kind == "rate_limit":
        return ModelRateLimitedError(
            f"The model endpoint {target.named} is rate limiting requests (HTTP 429): "
            f"{_provider_message(exc, secrets)}{tail}",
            attempts=attempts,
            chunks_received=attempt.chunks,
            retry_after_ms=None if retry_after_s is None else min(retry_after_s * 1000, retry_after_cap_ms),
            endpoint=target.endpoint,
            model=target.model,
        )
    if kind == "transport":
        code = classification.transport_code
        hint = _TRANSPORT_HINTS.get(code or "")
        return ModelTransportError(
            f"The connection to the model endpoint {target.named} failed ({code}"
            f"{': ' + hint if hint else ''}): {_provider_message(exc, secrets)}{tail}",
            attempts=attempts,
            chunks_received=attempt.chunks,
            retryable=True,
            phase=attempt.phase,
            transport_code=code,
            status=classification.status,
            endpoint=target.endpoint,
            model=target.model,
        )
    if kind == "http":
        hint = missing_version_hint(target.endpoint) if classification.status == 404 else None
        return ModelHTTPError(
            f"The model endpoint {target.named} answered HTTP {classification.status}: "
            f"{_provider_message(exc, secrets)}{'; ' + hint if hint else ''}{tail}",
            attempts=attempts,
            chunks_received=attempt.chunks,
            retryable=classification.diagnosis == "retryable",
            phase=attempt.phase,
            status=classification.status,
            endpoint=target.endpoint,
            model=target.model,
        )
    import openai  # only reached on a failure; the SDK is already loaded by then

    if isinstance(exc, openai.OpenAIError):
        return ModelProviderError(
            f"The model provider at {target.named} reported an error: {_provider_message(exc, secrets)}{tail}",
            attempts=attempts,
            chunks_received=attempt.chunks,
            retryable=False,
            phase=attempt.phase,
            status=classification.status,
            endpoint=target.endpoint,
            model=target.model,
        )
    return None


def _retry_after_of(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return retry_after_from_headers(headers) if headers is not None else None


def _notify(policy: StreamPolicy, event: RetryEvent) -> None:
    logger.warning(
        "model request attempt %d failed (%s: %s); retrying in %.2fs (%s retry %d)",
        event.attempt,
        event.classification.kind,
        event.classification.reason,
        event.delay_s,
        event.policy,
        event.retry,
    )
    if policy.on_retry is not None:
        try:
            policy.on_retry(event)
        except Exception:
            logger.exception("StreamPolicy.on_retry raised; ignored")


async def stream_chat(
    client: AsyncOpenAI, request: ChatRequest, policy: StreamPolicy | None = None
) -> AsyncGenerator[StreamEvent, None]:
    """Yield :class:`Delta` values then exactly one :class:`Finished`, or raise a :class:`ModelTurnError`.

    Invariants:

    - every attempt runs under the watchdog in a per-request cancel scope inside the caller's; its HTTP
      response is closed (``stream.close()``) whenever the attempt ends, whatever the reason;
    - a failed attempt is retried only within ``policy``'s budgets and only if none of its events was yielded,
      so the caller never sees replayed or duplicated output; a retry is not an event of the stream (it is
      logged, and reported to ``policy.on_retry``);
    - the caller's cancellation (cancel scope, deadline) is never retried or relabelled: it ends any attempt
      or backoff wait at once and propagates as is;
    - a retry wait that would outlast the caller's deadline is not started: the final error is raised instead;
    - errors that are not model failures (bugs) propagate unchanged.

    Consume it in one task and close it deterministically: ``async with
    contextlib.aclosing(stream_chat(...))``.
    """
    policy = policy or StreamPolicy()
    client = _without_sdk_retries(client)
    secrets: tuple[str | None, ...] = (getattr(client, "api_key", None),)
    target = _target_of(client, request)
    close_s = policy.close_timeout_ms / 1000
    budget = RetryBudget(policy)
    attempts = 0
    while True:
        attempts += 1
        attempt = _Attempt()

        async def open_stream(attempt: _Attempt = attempt) -> ChunkStream[Any]:
            return await _open(client, request, attempt, secrets, close_s)

        try:
            async with aclosing(
                guarded_stream(
                    open_stream,
                    idle_timeout_ms=policy.idle_timeout_ms,
                    max_lifetime_ms=policy.max_lifetime_ms,
                    close_timeout_ms=policy.close_timeout_ms,
                )
            ) as chunks:
                async for chunk in chunks:
                    attempt.chunks += 1
                    for choice in chunk.choices:
                        delta = _delta_of(choice)
                        if delta is not None:
                            attempt.content = attempt.content or bool(delta.text)
                            attempt.yielded += 1
                            yield delta
                        if choice.finish_reason:
                            attempt.finish_reason = choice.finish_reason
            if attempt.chunks == 0:
                raise StreamContentError("The model stream ended without any chunk", reason="empty_stream")
            if attempt.finish_reason is None and not attempt.content:
                raise StreamContentError(
                    "The model stream ended without a finish reason and without any answer text",
                    reason="no_finish_no_content",
                    chunks_received=attempt.chunks,
                )
        except Exception as exc:
            decision, classification, retry_after_s = _decide(exc, budget, attempt)
            if decision is not None and not _fits_deadline(decision.delay_s):
                logger.warning("not retrying: a %.2fs wait would outlast the deadline", decision.delay_s)
                decision = None
            if decision is None:
                final = _final_error(
                    exc, classification, attempt, attempts, secrets, retry_after_s, policy.retry_after_cap_ms, target
                )
                if final is None:
                    raise
                raise final from exc
            _notify(
                policy,
                RetryEvent(attempts, decision.policy, decision.retry, decision.delay_s, classification, exc),
            )
            delay_s = decision.delay_s
        else:
            if attempts > 1:
                logger.info("model stream recovered on attempt %d", attempts)
            yield Finished(attempt.finish_reason)
            return
        await anyio.sleep(delay_s)  # outside the except block: a cancel here carries no stale context


def _decide(
    exc: Exception, budget: RetryBudget, attempt: _Attempt
) -> tuple[RetryDecision | None, RetryClassification, float | None]:
    classification = classify_retry_error(exc)
    retry_after_s = _retry_after_of(exc) if classification.kind in ("rate_limit", "http") else None
    decision = budget.decide(classification, yielded=attempt.yielded > 0, retry_after_s=retry_after_s)
    return decision, classification, retry_after_s


def _fits_deadline(delay_s: float) -> bool:
    return anyio.current_effective_deadline() - anyio.current_time() >= delay_s
