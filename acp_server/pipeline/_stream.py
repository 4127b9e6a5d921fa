"""Execute one streamed chat request, guarded and retried, and deliver its deltas.

The fast path: the request body is built once per turn with one ``json.dumps`` of plain values and posted
through the SDK's client (``client.post``: its base URL, auth, headers, timeouts, and its exception classes for
an error status or a failed connection), skipping the SDK's parameter transform; the response's SSE body is read
here (``_sse.py``) and each ``data:`` event decoded with one ``json.loads`` into plain dicts, then deltas,
without the SDK's per-chunk model objects.

One *turn* = up to a few *attempts* (HTTP requests). Each attempt runs under the watchdog (``_watchdog.py``)
in its own per-request cancel scope, a child of the caller's; failures are classified (``_classify.py``) and
retried or not by the policies (``_retry.py``). This module is the one place where openai / httpx2 failures
become pipeline errors (the ``ModelTurnError`` family, the original kept as ``__cause__``).

What a stream must be to count as an answer:

- **complete** only once every choice has its ``finish_reason``. ``[DONE]`` is optional: after the finish the
  stream is read at most ``finish_grace_ms`` more (a trailing usage chunk, ``[DONE]``, the end of the body), then
  closed, and nothing after the finish can fail the answer;
- a stream that ends after chunks but before a finish reason is **cut** (:class:`StreamTruncatedError`, a reset:
  retried only while nothing reached the caller, else ``model_transport_error`` with ``mid_stream`` and reason
  ``eof_without_finish``); one that ends before any chunk is empty (``model_stream_content``);
- a ``data:`` line that is not JSON or not UTF-8 (``invalid_json``), or JSON that is not a chunk
  (``invalid_chunk``), is ``model_stream_content``, never a bug;
- text is passed on without lone surrogates: halves split across chunks are joined, per channel (answer,
  reasoning), and a half that stays alone becomes U+FFFD (``_text.py``).

Two ways to consume a turn: :func:`stream_chat`, an async generator, and :func:`run_chat`, which calls back for
each delta under the attempt's lifetime scope so that ``--stream-max-lifetime-ms`` bounds the time the consumer
spends on the deltas too (a consumer blocked on backpressure cannot keep a request open past its cap).
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.lowlevel import checkpoint, checkpoint_if_cancelled

from ..provider import missing_version_hint, public_endpoint
from ..retry_after import retry_after_from_headers
from ._body import dumps_json
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
    StreamTruncatedError,
    ms_text,
    redact,
)
from ._retry import RetryBudget
from ._sse import split_events
from ._text import TextJoiner
from ._types import ChatRequest, Delta, Finished, RetryEvent, StreamEvent, StreamPolicy, ToolCallFragment
from ._watchdog import ChunkStream, guarded_stream

if TYPE_CHECKING:
    import httpx2
    import openai
    from openai import AsyncOpenAI

__all__ = ["request_body", "run_chat", "stream_chat"]

logger = logging.getLogger("acp_server.pipeline")

_PREVIEW_BYTES = 200
"""How much of a non-SSE body is quoted in the error."""


_DRAIN_S = 0.1
"""After ``[DONE]`` the rest of an HTTP/1.1 body is read for at most this long (as the SDK's own stream does), so
that the connection goes back to the pool instead of being closed."""

_CHAT_PATH = "/chat/completions"
_POST_OPTIONS: Any = {"security": {"bearer_auth": True}}
"""What the SDK's ``chat.completions.create`` asks of its client besides the body: the bearer key."""


_OWN_FIELDS = frozenset(("model", "messages", "stream"))


def request_body(request: ChatRequest) -> bytes:
    """The JSON body of ``request``'s streamed chat completion: one ``json.dumps`` of plain values, no SDK transform;
    its messages through ``request.encoder`` when it has one (the same JSON, each value encoded once per turn).

    UTF-8 as is; a lone surrogate (which UTF-8 cannot carry) is sent as its JSON escape instead of failing.
    """
    encoder = request.encoder
    if encoder is None or not _OWN_FIELDS.isdisjoint(request.extra):
        return dumps_json({"model": request.model, "messages": request.messages, "stream": True, **request.extra})
    head = dumps_json({"model": request.model})[:-1]
    tail = encoder.fields({"stream": True, **request.extra})[1:]
    return head + b',"messages":' + encoder.messages(request.messages) + b"," + tail


def _invalid_chunk(what: str, chunks: int) -> StreamContentError:
    return StreamContentError(
        f"The model stream sent a chunk that is not a chat.completion.chunk ({what})",
        reason="invalid_chunk",
        chunks_received=chunks,
    )


def _tool_calls(calls: object, chunks: int) -> tuple[ToolCallFragment, ...]:
    """The fragments of a delta's ``tool_calls``; ``invalid_chunk`` for what is not a list of tool call pieces."""
    if not isinstance(calls, list):
        raise _invalid_chunk("'tool_calls' is not a list", chunks)
    out: list[ToolCallFragment] = []
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            raise _invalid_chunk("a tool call is not an object", chunks)
        function = call.get("function")
        if function is None:
            function = {}
        elif not isinstance(function, dict):
            raise _invalid_chunk("a tool call's 'function' is not an object", chunks)
        index, call_id = call.get("index"), call.get("id")
        name, arguments = function.get("name"), function.get("arguments")
        if any(v is not None and not isinstance(v, str) for v in (call_id, name, arguments)):
            raise _invalid_chunk("a tool call's 'id', 'name' or 'arguments' is not a string", chunks)
        index = index if isinstance(index, int) and not isinstance(index, bool) else position
        out.append(ToolCallFragment(index, call_id, name, arguments or ""))
    return tuple(out)


class _Attempt:
    """Progress of one attempt, as the completion rules and the turn-level error mapping need it.

    Invariant: the deltas ``read`` returns carry no lone surrogate (one joiner per channel).
    """

    __slots__ = (
        "_finished",
        "_open",
        "_reasoning",
        "_text",
        "chunks",
        "finish_reason",
        "opened",
        "usage",
        "yielded",
    )

    def __init__(self) -> None:
        self.opened = False  # the response headers arrived (a stream object exists)
        self.chunks = 0  # raw chunks received
        self.yielded = 0  # deltas handed to the caller
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None  # the last ``usage`` a chunk carried
        self._open: set[int] = set()  # choices seen without their finish reason yet
        self._finished: set[int] = set()
        self._text = TextJoiner()
        self._reasoning = TextJoiner()

    @property
    def phase(self) -> Phase:
        if not self.opened:
            return "request"
        return "mid_stream" if self.chunks else "before_first_chunk"

    def complete(self) -> bool:
        """Every choice seen has its finish reason (and there was one)."""
        return bool(self._finished) and not self._open

    def read(self, chunk: Any) -> list[Delta]:
        """The deltas of one decoded ``data:`` event; raises ``invalid_chunk`` for what is not a chunk (ignored once
        complete)."""
        try:
            return self._read(chunk)
        except StreamContentError:
            if self.complete():
                return []
            raise

    def _read(self, chunk: Any) -> list[Delta]:
        if not isinstance(chunk, dict):
            raise _invalid_chunk(f"a JSON {type(chunk).__name__}", self.chunks)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if choices is None:  # ``{}``, or a usage-only chunk
            return []
        if not isinstance(choices, list):
            raise _invalid_chunk("'choices' is not a list", self.chunks)
        out: list[Delta] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise _invalid_chunk("a choice is not an object", self.chunks)
            index = choice.get("index", 0)
            index = index if isinstance(index, int) else 0
            finish = choice.get("finish_reason")
            if finish is not None and not isinstance(finish, str):
                raise _invalid_chunk("'finish_reason' is not a string", self.chunks)
            delta = choice.get("delta")
            if delta is not None:
                if not isinstance(delta, dict):
                    raise _invalid_chunk("'delta' is not an object", self.chunks)
                text = delta.get("content")
                if text is not None and not isinstance(text, str):
                    raise _invalid_chunk("'content' is not a string", self.chunks)
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                calls = delta.get("tool_calls")
                tool_calls = _tool_calls(calls, self.chunks) if calls else ()
                text = self._text.push(text) if text else ""
                reasoning = self._reasoning.push(reasoning) if isinstance(reasoning, str) and reasoning else ""
                if text or reasoning or tool_calls:
                    out.append(Delta(text, reasoning, tool_calls))
            if finish:
                self.finish_reason = finish
                self._finished.add(index)
                self._open.discard(index)
            elif index not in self._finished:
                self._open.add(index)
        return out

    def flush(self) -> Delta | None:
        """What the joiners still hold (a lone high half each, as U+FFFD), once the answer is complete."""
        text, reasoning = self._text.flush(), self._reasoning.flush()
        return Delta(text=text, reasoning=reasoning) if text or reasoning else None


@dataclass(frozen=True, slots=True)
class _SDKErrors:
    """The SDK's exception classes, and the transport failures its stream wraps in them (found once, lazily)."""

    timeouts: tuple[type[BaseException], ...]
    connection: tuple[type[BaseException], ...]
    api_error: type[openai.APIError]
    api_timeout: type[openai.APITimeoutError]
    api_connection: type[openai.APIConnectionError]


@functools.cache
def _sdk_errors() -> _SDKErrors:
    import ssl

    import httpx2
    import openai

    return _SDKErrors(
        timeouts=(httpx2.TimeoutException,),
        connection=(httpx2.RequestError, ssl.SSLError, anyio.EndOfStream),
        api_error=openai.APIError,
        api_timeout=openai.APITimeoutError,
        api_connection=openai.APIConnectionError,
    )


class _Events:
    """The ``data:`` events of one SSE response body, each decoded with one ``json.loads``: what the watchdog reads.

    Invariants: one value per ``data:`` event (comments, keep-alives and empty lines never reach the watchdog, so
    they never reset its timer); ``[DONE]`` ends the stream; a payload that is not JSON or not UTF-8 is
    ``invalid_json``; an ``{"error": ...}`` event is the SDK's ``APIError``; the body's transport failures are the
    SDK's ``APITimeoutError`` / ``APIConnectionError`` (the original as ``__cause__``), as its own stream raised
    them. ``close()`` releases the response.
    """

    __slots__ = ("_body", "_ended", "_errors", "_pending", "_ready", "_response", "_secrets", "chunks")

    def __init__(self, response: httpx2.Response, secrets: tuple[str | None, ...]) -> None:
        self._response = response
        self._body: AsyncGenerator[bytes, None] = response.aiter_bytes()
        self._errors = _sdk_errors()
        self._secrets = secrets
        self._pending = b""
        self._ready: deque[bytes] = deque()
        self._ended = False
        self.chunks = 0  # events decoded

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> Any:
        ready = self._ready
        while not ready:
            if self._ended:
                raise StopAsyncIteration
            await self._receive()
        data = ready.popleft()
        if data.startswith(b"[DONE]"):
            await self._finish()
            raise StopAsyncIteration
        try:
            value = json.loads(data)
        except json.JSONDecodeError as exc:
            quoted = redact(exc.doc[:80], self._secrets)
            raise StreamContentError(
                f"The model stream sent a data line that is not JSON ({exc.msg}): {quoted!r}",
                reason="invalid_json",
                chunks_received=self.chunks,
            ) from exc
        except UnicodeDecodeError as exc:
            byte = exc.object[exc.start : exc.start + 1]
            raise StreamContentError(
                f"The model stream sent a line that is not UTF-8 ({exc.reason}, byte {byte!r})",
                reason="invalid_json",
                chunks_received=self.chunks,
            ) from exc
        if isinstance(value, dict) and value.get("error"):
            raise self._error_event(value["error"])
        self.chunks += 1
        return value

    async def _receive(self) -> None:
        """Read the next piece of the body and queue the events it completes."""
        errors = self._errors
        try:
            piece = await self._body.__anext__()
        except StopAsyncIteration:
            self._ended = True
            events, self._pending = split_events(self._pending, b"", final=True)
        except errors.timeouts as exc:
            raise errors.api_timeout(request=self._response.request) from exc
        except errors.connection as exc:
            raise errors.api_connection(request=self._response.request) from exc
        else:
            events, self._pending = split_events(self._pending, piece)
        self._ready.extend(events)

    def _error_event(self, error: Any) -> openai.APIError:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        return self._errors.api_error(message, self._response.request, body=error)

    async def _finish(self) -> None:
        """After ``[DONE]``: nothing more is an event; the rest of an HTTP/1.1 body is drained, briefly."""
        self._ended = True
        self._ready.clear()
        if self._response.http_version != "HTTP/1.1":
            return
        with anyio.move_on_after(_DRAIN_S):
            try:
                async for _ in self._body:
                    await checkpoint()  # the deadline holds even over data that is already buffered
            except Exception as exc:  # the answer is over: a failing drain only costs the connection
                logger.debug("ignoring an error while draining a model stream after [DONE]: %r", exc)

    async def close(self) -> None:
        try:
            await self._response.aclose()
        finally:
            await self._body.aclose()


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
    body: bytes,
    attempt: _Attempt,
    secrets: tuple[str | None, ...],
    close_s: float,
) -> ChunkStream[Any]:
    """The request, sent through the SDK's client (its auth, headers, base URL, timeouts, and its exceptions for an
    error status or a failed connection), up to the response headers; a 200 that is not SSE is a non-retryable
    content error."""
    import httpx2
    import openai

    response = cast(
        "httpx2.Response",
        await client.post(
            _CHAT_PATH,
            cast_to=httpx2.Response,  # the response as it is, its body not read yet (``stream=True``)
            content=body,
            options=_POST_OPTIONS,
            stream=True,
            stream_cls=openai.AsyncStream[Any],  # never used: a ``cast_to`` of ``httpx2.Response`` wins
        ),
    )
    attempt.opened = True
    content_type = response.headers.get("content-type")
    if _is_sse(content_type):
        return _Events(response, secrets)
    try:
        preview = await _first_bytes(response, _PREVIEW_BYTES)
    except Exception:
        preview = b""
    finally:
        with anyio.move_on_after(close_s, shield=True):
            try:
                await response.aclose()
            except Exception as exc:
                logger.debug("ignoring an error while closing a model response: %r", exc)
    quoted = redact(preview.decode("utf-8", "replace"), secrets)
    raise StreamContentError(
        f"The model endpoint answered {content_type!r} instead of an SSE stream; first bytes: {quoted!r}",
        reason="non_sse",
        content_type=content_type,
    )


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
    target: _Target,
    note: str = "",
) -> ModelTurnError | None:
    """The turn's error for a final failure (None: not a model failure, let it propagate as is).

    Every message names the endpoint and model it concerns, and the details carry them as ``endpoint`` /
    ``model``; ``note`` says why a retryable failure was not retried, when that was not the budget.
    """
    tail = note + _attempts_text(attempts)
    retry_after_ms = None if retry_after_s is None else retry_after_s * 1000
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
    if isinstance(exc, StreamTruncatedError):
        return ModelTransportError(
            f"The model stream from {target.named} ended after {exc.chunks_received} chunk(s) without a finish "
            f"reason: the answer was cut (ECONNRESET){tail}",
            attempts=attempts,
            chunks_received=exc.chunks_received,
            retryable=True,
            phase="mid_stream",
            transport_code=exc.code,
            reason="eof_without_finish",
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
            retry_after_ms=retry_after_ms,
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
        if classification.reason.startswith("invalid request"):
            hint = "the server says the request is invalid: not retried"
        return ModelHTTPError(
            f"The model endpoint {target.named} answered HTTP {classification.status}: "
            f"{_provider_message(exc, secrets)}{'; ' + hint if hint else ''}{tail}",
            attempts=attempts,
            chunks_received=attempt.chunks,
            retryable=classification.diagnosis == "retryable",
            phase=attempt.phase,
            status=classification.status,
            retry_after_ms=retry_after_ms,
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
    # INFO: a retry that works is no news for the user (the client is shown the wait, see run_chat's ``on_retry``);
    # one that does not ends in the turn's error, which its caller reports
    logger.info(
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


class _Run:
    """One turn's attempts: what they share (client, budgets, counters) and what each attempt does."""

    def __init__(self, client: AsyncOpenAI, request: ChatRequest, policy: StreamPolicy | None) -> None:
        self.policy = policy = policy or StreamPolicy()
        self.client = _without_sdk_retries(client)
        self.request = request
        self.body = request_body(request)  # once per turn, sent as is by every attempt
        self.secrets: tuple[str | None, ...] = (getattr(self.client, "api_key", None),)
        self.close_s = policy.close_timeout_ms / 1000
        self.budget = RetryBudget(policy)
        self.attempts = 0
        self.retrying: RetryEvent | None = None  # the retry decided last (what ``on_retry`` is told)

    @functools.cached_property
    def target(self) -> _Target:
        """What the error messages name: only needed once an attempt failed (parsing the base URL costs ~30 µs)."""
        return _target_of(self.client, self.request)

    def next_attempt(self) -> _Attempt:
        self.attempts += 1
        return _Attempt()

    async def deltas(self, attempt: _Attempt, *, watchdog_lifetime: bool) -> AsyncGenerator[Delta, None]:
        """One attempt's deltas; raises the attempt's error (empty, cut, content, timeout, SDK errors)."""
        policy = self.policy

        async def open_stream() -> ChunkStream[Any]:
            return await _open(self.client, self.body, attempt, self.secrets, self.close_s)

        async with aclosing(
            guarded_stream(
                open_stream,
                idle_timeout_ms=policy.idle_timeout_ms,
                max_lifetime_ms=policy.max_lifetime_ms if watchdog_lifetime else 0,
                close_timeout_ms=policy.close_timeout_ms,
                complete=attempt.complete,
                finish_grace_ms=policy.finish_grace_ms,
            )
        ) as chunks:
            async for chunk in chunks:
                attempt.chunks += 1
                for delta in attempt.read(chunk):
                    yield delta
        if attempt.chunks == 0:
            raise StreamContentError("The model stream ended without any chunk", reason="empty_stream")
        if not attempt.complete():
            raise StreamTruncatedError(attempt.chunks)
        tail = attempt.flush()
        if tail is not None:
            yield tail

    async def deliver(self, attempt: _Attempt, on_delta: Callable[[Delta], Awaitable[None]]) -> None:
        """One attempt, each delta handed to ``on_delta``, all of it under the attempt's lifetime scope."""
        max_lifetime_ms = self.policy.max_lifetime_ms
        started = anyio.current_time()
        deadline = started + max_lifetime_ms / 1000 if max_lifetime_ms > 0 else math.inf
        cut = False
        with anyio.CancelScope(deadline=deadline) as cap:
            try:
                async with aclosing(self.deltas(attempt, watchdog_lifetime=False)) as deltas:
                    async for delta in deltas:
                        attempt.yielded += 1
                        await on_delta(delta)
            except Exception:
                if not cap.cancel_called:
                    raise
                cut = True  # what the request cut by the cap raised instead of a cancellation
        if not (cut or cap.cancelled_caught):
            return
        await checkpoint_if_cancelled()  # W4: the caller's own cancellation wins over the cap
        if attempt.complete():  # the cap passed during the grace reads: the answer is whole
            tail = attempt.flush()
            if tail is not None:
                attempt.yielded += 1
                await on_delta(tail)
            return
        raise StreamLifetimeExceededError(max_lifetime_ms, attempt.chunks, (anyio.current_time() - started) * 1000)

    def settle(self, exc: Exception, attempt: _Attempt) -> float | ModelTurnError | None:
        """After a failed attempt: the delay before the next one, the turn's final error, or None (a bug: let
        ``exc`` propagate as is)."""
        classification = classify_retry_error(exc)
        retry_after_s = _retry_after_of(exc) if classification.kind in ("rate_limit", "http") else None
        budget = self.budget
        decision = budget.decide(classification, yielded=attempt.yielded > 0, retry_after_s=retry_after_s)
        note = ""
        if budget.retry_after_refused and retry_after_s is not None:
            note = (
                f"; it asks to retry after {ms_text(round(retry_after_s, 3))}s, longer than this turn may still wait "
                f"(at most {ms_text(self.policy.retry_after_cap_ms / 1000)}s of Retry-After in all): not retried"
            )
        if decision is not None and not _fits_deadline(decision.delay_s):
            logger.warning("not retrying: a %.2fs wait would outlast the deadline", decision.delay_s)
            note = f"; the retry (in {ms_text(round(decision.delay_s, 3))}s) would end after the deadline: not retried"
            decision = None
        if decision is None:
            return _final_error(
                exc, classification, attempt, self.attempts, self.secrets, retry_after_s, self.target, note
            )
        self.retrying = RetryEvent(
            self.attempts, decision.policy, decision.retry, decision.delay_s, classification, exc
        )
        _notify(self.policy, self.retrying)
        return decision.delay_s

    def recovered(self) -> None:
        if self.attempts > 1:
            logger.info("model stream recovered on attempt %d", self.attempts)


async def stream_chat(
    client: AsyncOpenAI, request: ChatRequest, policy: StreamPolicy | None = None
) -> AsyncGenerator[StreamEvent, None]:
    """Yield :class:`Delta` values then exactly one :class:`Finished`, or raise a :class:`ModelTurnError`.

    Invariants:

    - every attempt runs under the watchdog in a per-request cancel scope inside the caller's; its HTTP
      response is closed (``stream.close()``) whenever the attempt ends, whatever the reason;
    - ``Finished`` comes only after a finish reason for every choice (module docstring): a cut stream fails;
    - a failed attempt is retried only within ``policy``'s budgets and only if none of its events was yielded,
      so the caller never sees replayed or duplicated output; a retry is not an event of the stream (it is
      logged, and reported to ``policy.on_retry``);
    - the caller's cancellation (cancel scope, deadline) is never retried or relabelled: it ends any attempt
      or backoff wait at once and propagates as is;
    - a retry wait that would outlast the caller's deadline is not started: the final error is raised instead;
    - errors that are not model failures (bugs) propagate unchanged.

    The lifetime cap is checked while the stream is read: time the consumer holds a delta counts, but the cap
    can only act at the next read. Use :func:`run_chat` when the consumer may block.

    Consume it in one task and close it deterministically: ``async with
    contextlib.aclosing(stream_chat(...))``.
    """
    run = _Run(client, request, policy)
    while True:
        attempt = run.next_attempt()
        try:
            async with aclosing(run.deltas(attempt, watchdog_lifetime=True)) as deltas:
                async for delta in deltas:
                    attempt.yielded += 1
                    yield delta
        except Exception as exc:
            delay_s = _retry_delay_or_raise(run, exc, attempt)
        else:
            run.recovered()
            yield Finished(attempt.finish_reason, attempt.usage)
            return
        await anyio.sleep(delay_s)  # outside the except block: a cancel here carries no stale context


async def run_chat(
    client: AsyncOpenAI,
    request: ChatRequest,
    policy: StreamPolicy | None,
    on_delta: Callable[[Delta], Awaitable[None]],
    on_retry: Callable[[RetryEvent], Awaitable[None]] | None = None,
) -> Finished:
    """Stream one turn into ``on_delta`` and return its :class:`Finished`, or raise a :class:`ModelTurnError`.

    The invariants of :func:`stream_chat`, plus: each attempt, ``on_delta`` calls included, runs in a cancel
    scope whose deadline is the attempt's lifetime cap, so the cap holds even while ``on_delta`` is blocked
    (a consumer that stops reading): ``on_delta`` is then cancelled, the request closed, and the attempt fails
    with the lifetime error (``model_stream_timeout``, ``maxLifetimeMs``). ``on_delta``'s own errors propagate
    as they are. ``on_retry`` is awaited before each retry's wait (so the user can be told it waits), under the
    caller's cancel scope like the wait itself.
    """
    run = _Run(client, request, policy)
    while True:
        attempt = run.next_attempt()
        try:
            await run.deliver(attempt, on_delta)
        except Exception as exc:
            delay_s = _retry_delay_or_raise(run, exc, attempt)
        else:
            run.recovered()
            return Finished(attempt.finish_reason, attempt.usage)
        if on_retry is not None and run.retrying is not None:
            await on_retry(run.retrying)
        await anyio.sleep(delay_s)  # outside the except block: a cancel here carries no stale context


def _retry_delay_or_raise(run: _Run, exc: Exception, attempt: _Attempt) -> float:
    """The wait before the next attempt after ``exc``; raises the turn's error (or ``exc`` itself: not ours to
    map) when no attempt is left. Call it from the ``except`` block of the failed attempt."""
    outcome = run.settle(exc, attempt)
    if isinstance(outcome, ModelTurnError):
        raise outcome from exc
    if outcome is None:
        raise exc
    return outcome


def _fits_deadline(delay_s: float) -> bool:
    return anyio.current_effective_deadline() - anyio.current_time() >= delay_s
