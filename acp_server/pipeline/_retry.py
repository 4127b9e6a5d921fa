"""Retry policies of one streamed turn: which failure is retried, how often, after how long.

Four budgets, counted separately, all bounded (defaults from :class:`StreamPolicy`). A policy applies only if
nothing of the failed attempt was yielded to the caller:

- ``stream_transport`` (W9) — transport ETIMEDOUT / ECONNRESET (a watchdog timeout is ETIMEDOUT: the stall of
  the incident, or a reset): at most **2** retries, waiting **1 s then 2 s**.
- ``connect`` — nothing listens at the endpoint (ECONNREFUSED) or its host name does not resolve (ENOTFOUND,
  EAI_AGAIN): at most **1** quick retry after **0.25 s**, so a wrong ``--base-url`` is reported within a
  second or two instead of after half a minute of backoff.
- ``backoff`` — 429, retryable 5xx, and the other transport codes (EHOSTUNREACH, EPIPE, ...), all of which
  happen before the stream starts: at most **4** retries, waiting 1.5 s × 2^(n-1) capped at 30 s, ± 30 %
  jitter. The computed waits after 5xx answers add up to at most ``server_error_wait_ms`` (**6 s**) per turn: a
  wait is cut to what is left, and once nothing is left the 5xx is final — so a server that answers 500 every
  time is reported within about 7 s (1.5 + 3 + 1.5 s of waits, 4 requests), not after 24 s of backoff. A 5xx
  whose body says the request is invalid is never retried (``_classify.py``). A ``Retry-After`` (delta-seconds
  or HTTP date; or OpenAI's ``retry-after-ms``; read by
  :func:`acp_server.retry_after.retry_after_from_headers`) replaces the computed wait. The ``Retry-After``
  waits of one turn add up to at most ``retry_after_cap_ms`` (**5 min**): a ``Retry-After`` longer than what
  is left is not waited for at all, the turn fails at once with the provider's time in the error
  (``retryAfterMs``) — waiting part of it would only earn another 429.
- ``content`` — the stream ended with no chunk, or a ``data:`` line was not JSON (or not UTF-8) or not a chunk:
  at most **1** retry, waiting 0.5 s. (A stream that ends after chunks without a finish reason is cut: it is a
  reset, ECONNRESET, under ``stream_transport``.)

So one turn makes at most 1 + 2 + 1 + 4 + 1 = 9 requests with the defaults. Everything else is final: aborts
(never retried), 401/403 and other 4xx, a 5xx that says the request is invalid, a non-SSE body, unknown errors,
and **any failure after a chunk of the attempt was yielded** (no replay mid-generation: a stall after chunks
surfaces as ``model_stream_timeout``).

The waits happen in ``_stream.py`` with ``anyio.sleep`` inside the caller's cancel scope, so a cancel (or the
caller's deadline) ends a wait at once; a wait that would outlast the caller's deadline is not started. The
SDK's own retries are switched off there, so this is the only retry layer. Every wait, and the whole time a turn
spends waiting, is bounded: the budgets are finite and each ``Retry-After`` wait fits the remaining allowance.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._classify import RetryClassification
from ._types import RetryPolicyName, StreamPolicy

__all__ = ["CONNECT_CODES", "STREAM_TRANSPORT_CODES", "RetryBudget", "RetryDecision", "backoff_delay_s"]

STREAM_TRANSPORT_CODES = frozenset({"ETIMEDOUT", "ECONNRESET"})
"""Transport codes for which the whole request is retried while nothing was yielded (W9)."""

CONNECT_CODES = frozenset({"ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"})
"""Transport codes that mean the endpoint is wrong or down: one quick retry, then the error (fail fast)."""


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Retry under ``policy`` (its ``retry``-th use, 1-based) after ``delay_s`` seconds."""

    policy: RetryPolicyName
    retry: int
    delay_s: float


def backoff_delay_s(retry: int, policy: StreamPolicy) -> float:
    """The ``retry``-th (1-based) exponential backoff delay with jitter, in seconds."""
    base = min(policy.backoff_initial_ms * 2.0 ** (retry - 1), policy.backoff_max_ms)
    spread = policy.backoff_jitter * (2 * policy.jitter_source() - 1)
    return max(0.0, base * (1 + spread)) / 1000


class RetryBudget:
    """The retry budgets of one turn. ``decide`` consumes one retry when it returns a decision.

    ``retry_after_refused`` says whether the last ``decide`` refused a ``Retry-After`` that did not fit what is
    left of the turn's allowance (``retry_after_cap_ms`` in all).
    """

    __slots__ = ("_policy", "_retry_after_left_s", "_server_error_left_s", "_used", "retry_after_refused")

    def __init__(self, policy: StreamPolicy) -> None:
        self._policy = policy
        self._used: dict[RetryPolicyName, int] = {"stream_transport": 0, "connect": 0, "backoff": 0, "content": 0}
        self._retry_after_left_s = policy.retry_after_cap_ms / 1000
        self._server_error_left_s = policy.server_error_wait_ms / 1000
        self.retry_after_refused = False

    def decide(
        self,
        classification: RetryClassification,
        *,
        yielded: bool,
        retry_after_s: float | None = None,
    ) -> RetryDecision | None:
        """Whether (and after how long) to retry a failed attempt; None = the failure is final.

        ``yielded`` says whether anything of the failed attempt reached the caller: if so, nothing is retried.
        A ``Retry-After`` longer than what is left of the turn's allowance is refused (``retry_after_refused``).
        """
        self.retry_after_refused = False
        if yielded or classification.diagnosis != "retryable":
            return None
        policy = self._policy
        name: RetryPolicyName
        if classification.kind == "transport" and classification.transport_code in STREAM_TRANSPORT_CODES:
            name, limit = "stream_transport", policy.stream_max_retries
        elif classification.kind == "transport" and classification.transport_code in CONNECT_CODES:
            name, limit = "connect", policy.connect_max_retries
        elif classification.kind in ("rate_limit", "http", "transport"):
            name, limit = "backoff", policy.backoff_max_retries
        elif classification.kind == "stream_content":
            name, limit = "content", policy.content_max_retries
        else:
            return None
        retry = self._used[name] + 1
        if retry > limit:
            return None
        server_error = name == "backoff" and classification.kind == "http" and retry_after_s is None
        if server_error and self._server_error_left_s <= 0:
            return None
        if name == "backoff" and retry_after_s is not None:
            if retry_after_s > self._retry_after_left_s:
                self.retry_after_refused = True
                return None
            self._retry_after_left_s -= retry_after_s
        self._used[name] = retry
        if name == "stream_transport":
            delays = policy.stream_retry_delays_ms
            delay_s = delays[min(retry, len(delays)) - 1] / 1000
        elif name == "connect":
            delay_s = policy.connect_retry_delay_ms / 1000
        elif name == "content":
            delay_s = policy.content_retry_delay_ms / 1000
        elif retry_after_s is not None:
            delay_s = retry_after_s
        else:
            delay_s = backoff_delay_s(retry, policy)
            if server_error:
                delay_s = min(delay_s, self._server_error_left_s)
                self._server_error_left_s -= delay_s
        return RetryDecision(name, retry, delay_s)
