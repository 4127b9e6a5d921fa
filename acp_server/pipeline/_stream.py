"""Execute one streamed chat request, guarded and retried, and deliver its deltas.

The fast path: the request body is built once per turn with one ``json.dumps`` of plain values and posted
through the SDK's client (``client.post``: its base URL, auth, headers, timeouts, and its exception classes for
an error status or a failed connection), skipping the SDK's parameter transform; the response's SSE body is read
by ``_events.py`` (``_sse.py``) and each ``data:`` event decoded with one ``json.loads`` into plain dicts, then
deltas, without the SDK's per-chunk model objects.

One *turn* = up to a few *attempts* (HTTP requests), driven by ``_run.py``: each attempt runs under the watchdog
(``_watchdog.py``) in its own per-request cancel scope, a child of the caller's; failures are classified
(``_classify.py``) and retried or not by the policies (``_retry.py``). The request is built and sent by
``_request.py``, its body read by ``_events.py`` (transport errors mapped once, ``_transport.py``) and parsed by
``_chunks.py``; ``_outcome.py`` is the one place where a final failure becomes a pipeline error (the
``ModelTurnError`` family, the original kept as ``__cause__``).

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

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING

import anyio

from ._request import request_body
from ._request import without_sdk_retries as _without_sdk_retries  # noqa: F401  (its tests import it from here)
from ._run import Run
from ._types import ChatRequest, Delta, Finished, RetryEvent, StreamEvent, StreamPolicy

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["request_body", "run_chat", "stream_chat"]


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
    run = Run(client, request, policy)
    while True:
        attempt = run.next_attempt()
        try:
            async with aclosing(run.deltas(attempt, watchdog_lifetime=True)) as deltas:
                async for delta in deltas:
                    attempt.yielded += 1
                    yield delta
        except Exception as exc:
            delay_s = run.retry_delay_or_raise(exc, attempt)
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
    run = Run(client, request, policy)
    while True:
        attempt = run.next_attempt()
        try:
            await run.deliver(attempt, on_delta)
        except Exception as exc:
            delay_s = run.retry_delay_or_raise(exc, attempt)
        else:
            run.recovered()
            return Finished(attempt.finish_reason, attempt.usage)
        if on_retry is not None and run.retrying is not None:
            await on_retry(run.retrying)
        await anyio.sleep(delay_s)  # outside the except block: a cancel here carries no stale context
