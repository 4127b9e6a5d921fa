"""One turn's attempts: what they share (client, body, budgets, counters), what each attempt does, and the retry
decision after a failed one.

Each attempt runs under the watchdog (``_watchdog.py``) in its own per-request cancel scope, a child of the
caller's; a failure is classified (``_classify.py``) and retried or not by the policies (``_retry.py``); the
turn's final error comes from ``_outcome.py``. Invariant: the caller's cancellation is never retried nor
relabelled, and a failure that is not a model failure propagates as it is.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
from anyio.lowlevel import checkpoint_if_cancelled

from ._chunks import Attempt
from ._classify import classify_retry_error
from ._exceptions import ModelTurnError, StreamContentError, StreamLifetimeExceededError, StreamTruncatedError, ms_text
from ._outcome import Failure, Target, final_error, retry_after_of, target_of
from ._request import open_events, request_body, without_sdk_retries
from ._retry import RetryBudget
from ._types import ChatRequest, Delta, RetryEvent, StreamPolicy
from ._watchdog import ChunkStream, guarded_stream

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["Run"]

logger = logging.getLogger("acp_server.pipeline")


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


def _fits_deadline(delay_s: float) -> bool:
    return anyio.current_effective_deadline() - anyio.current_time() >= delay_s


class Run:
    """One turn's attempts: what they share (client, budgets, counters) and what each attempt does."""

    def __init__(self, client: AsyncOpenAI, request: ChatRequest, policy: StreamPolicy | None) -> None:
        self.policy = policy = policy or StreamPolicy()
        self.client = without_sdk_retries(client)
        self.request = request
        self.body = request_body(request)  # once per turn, sent as is by every attempt
        self.secrets: tuple[str | None, ...] = (getattr(self.client, "api_key", None),)
        self.close_s = policy.close_timeout_ms / 1000
        self.budget = RetryBudget(policy)
        self.attempts = 0
        self.retrying: RetryEvent | None = None  # the retry decided last (what ``on_retry`` is told)

    @functools.cached_property
    def target(self) -> Target:
        """What the error messages name: only needed once an attempt failed (parsing the base URL costs ~30 µs)."""
        return target_of(self.client, self.request)

    def next_attempt(self) -> Attempt:
        self.attempts += 1
        return Attempt()

    async def deltas(self, attempt: Attempt, *, watchdog_lifetime: bool) -> AsyncGenerator[Delta, None]:
        """One attempt's deltas; raises the attempt's error (empty, cut, content, timeout, SDK errors)."""
        policy = self.policy

        async def open_stream() -> ChunkStream[Any]:
            return await open_events(self.client, self.body, attempt, self.secrets, self.close_s)

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

    async def deliver(self, attempt: Attempt, on_delta: Callable[[Delta], Awaitable[None]]) -> None:
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

    def settle(self, exc: Exception, attempt: Attempt) -> float | ModelTurnError | None:
        """After a failed attempt: the delay before the next one, the turn's final error, or None (a bug: let
        ``exc`` propagate as is)."""
        classification = classify_retry_error(exc)
        retry_after_s = retry_after_of(exc) if classification.kind in ("rate_limit", "http") else None
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
            return final_error(
                Failure(
                    exc,
                    classification,
                    self.attempts,
                    attempt.chunks,
                    attempt.phase,
                    self.secrets,
                    self.target,
                    retry_after_s,
                    note,
                )
            )
        self.retrying = RetryEvent(
            self.attempts, decision.policy, decision.retry, decision.delay_s, classification, exc
        )
        _notify(self.policy, self.retrying)
        return decision.delay_s

    def retry_delay_or_raise(self, exc: Exception, attempt: Attempt) -> float:
        """The wait before the next attempt after ``exc``; raises the turn's error (or ``exc`` itself: not ours to
        map) when no attempt is left. Call it from the ``except`` block of the failed attempt."""
        outcome = self.settle(exc, attempt)
        if isinstance(outcome, ModelTurnError):
            raise outcome from exc
        if outcome is None:
            raise exc
        return outcome

    def recovered(self) -> None:
        if self.attempts > 1:
            logger.info("model stream recovered on attempt %d", self.attempts)
