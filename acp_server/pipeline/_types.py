"""What the pipeline takes (a chat request and a policy) and what it yields (deltas, then one finish)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._body import RequestEncoder
from ._classify import RetryClassification

RetryPolicyName: TypeAlias = Literal["stream_transport", "connect", "backoff", "content"]

DEFAULT_IDLE_TIMEOUT_MS = 120_000
"""A model stream is aborted after this long without a chunk (``--stream-idle-timeout-ms``)."""
DEFAULT_MAX_LIFETIME_MS = 900_000
"""A model stream is aborted when it lasts longer than this (``--stream-max-lifetime-ms``)."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One streamed chat completion, in OpenAI terms: plain JSON values, sent as they are (no SDK transform).

    ``extra`` holds further top-level fields of the request body (``temperature``, ``tools`` ...); ``model``,
    ``messages`` and ``stream`` are the pipeline's. ``encoder``: the turn's :class:`RequestEncoder`, so that a
    request that extends the previous one's messages encodes only the new ones (the body is the same).
    """

    model: str
    messages: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)
    encoder: RequestEncoder | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """A failed attempt about to be retried (given to ``StreamPolicy.on_retry``, and logged).

    ``attempt`` is the 1-based number of the attempt that failed; ``retry`` the 1-based number of this retry
    within ``policy``'s budget; the next attempt starts ``delay_s`` seconds later.
    """

    attempt: int
    policy: RetryPolicyName
    retry: int
    delay_s: float
    classification: RetryClassification
    error: BaseException


@dataclass(frozen=True, slots=True)
class StreamPolicy:
    """Timeouts and retry bounds of one streamed turn. Durations in milliseconds; a timer ``<= 0`` is off.

    Watchdog (W1-W3): ``idle_timeout_ms`` bounds the wait for the response headers and then for each raw
    chunk; ``max_lifetime_ms`` bounds a whole attempt (with :func:`run_chat`, including the time the consumer
    spends handling its deltas). Completion: an attempt is complete once every choice has its finish reason;
    after that the stream is read at most ``finish_grace_ms`` more (a trailing usage chunk, ``[DONE]``), then
    closed, never waited for under the idle timer (0 = close at once). Retries (``_retry.py``), each budget
    counted separately:

    - stream transport (W9): ETIMEDOUT / ECONNRESET before anything was yielded → at most
      ``stream_max_retries``, waiting ``stream_retry_delays_ms[i]`` (the last value repeats);
    - connect: nothing listens (ECONNREFUSED) or the host name does not resolve (ENOTFOUND, EAI_AGAIN) → at
      most ``connect_max_retries``, waiting ``connect_retry_delay_ms``: fail fast, a wait will not fix a URL;
    - backoff: 429, retryable 5xx, other transport errors → at most ``backoff_max_retries``, exponential from
      ``backoff_initial_ms`` doubling up to ``backoff_max_ms``, ± ``backoff_jitter``; a ``Retry-After``
      replaces the computed delay; the ``Retry-After`` waits of one turn add up to at most
      ``retry_after_cap_ms``: one that does not fit is not waited for (the error carries the provider's time);
      the computed waits after 5xx answers add up to at most ``server_error_wait_ms`` (a wait is cut to what is
      left; nothing left: the error is final), so a server that keeps failing is reported within seconds;
    - content: a stream that ended empty, or sent a data line that is not JSON or not a chunk, before anything
      was yielded → at most ``content_max_retries``, waiting ``content_retry_delay_ms``.

    ``jitter_source`` returns floats in [0, 1) (``random.random``; a constant in tests: 0.5 = no jitter).
    ``on_retry`` is called synchronously before each retry wait (its exceptions are logged and ignored).
    ``close_timeout_ms`` bounds the shielded ``stream.close()`` on every exit.
    """

    idle_timeout_ms: float = DEFAULT_IDLE_TIMEOUT_MS
    max_lifetime_ms: float = DEFAULT_MAX_LIFETIME_MS
    stream_max_retries: int = 2
    stream_retry_delays_ms: tuple[float, ...] = (1_000, 2_000)
    connect_max_retries: int = 1
    connect_retry_delay_ms: float = 250
    backoff_max_retries: int = 4
    backoff_initial_ms: float = 1_500
    backoff_max_ms: float = 30_000
    backoff_jitter: float = 0.3
    retry_after_cap_ms: float = 300_000
    server_error_wait_ms: float = 6_000
    content_max_retries: int = 1
    content_retry_delay_ms: float = 500
    close_timeout_ms: float = 1_000
    finish_grace_ms: float = 1_000
    jitter_source: Callable[[], float] = field(default=random.random, repr=False)
    on_retry: Callable[[RetryEvent], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("idle_timeout_ms", "max_lifetime_ms"):
            if math.isnan(getattr(self, name)):
                raise ValueError(f"{name} must be a number (<= 0 disables)")
        for name in ("stream_max_retries", "connect_max_retries", "backoff_max_retries", "content_max_retries"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0")
        delays = (
            *self.stream_retry_delays_ms,
            self.connect_retry_delay_ms,
            self.backoff_initial_ms,
            self.backoff_max_ms,
            self.retry_after_cap_ms,
            self.server_error_wait_ms,
            self.content_retry_delay_ms,
            self.finish_grace_ms,
        )
        if any(not (0 <= d < math.inf) for d in delays):
            raise ValueError("retry delays and finish_grace_ms must be finite and >= 0")
        if self.stream_max_retries and not self.stream_retry_delays_ms:
            raise ValueError("stream_retry_delays_ms needs a delay when stream_max_retries > 0")
        if not 0 <= self.backoff_jitter <= 1:
            raise ValueError("backoff_jitter must be within [0, 1]")
        if not 0 < self.close_timeout_ms < math.inf:
            raise ValueError("close_timeout_ms must be finite and > 0")


@dataclass(frozen=True, slots=True)
class ToolCallFragment:
    """One piece of a streamed tool call, as the chunk had it: the call's ``index`` among the answer's calls, its
    ``id`` and function ``name`` (usually only in the first piece) and the next piece of its JSON ``arguments``."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of streamed output: answer text, reasoning text and/or tool call fragments (in chunk order).

    Invariant: ``text`` and ``reasoning`` never carry a lone surrogate; a delta the pipeline yields is never empty.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallFragment, ...] = ()


@dataclass(frozen=True, slots=True)
class Finished:
    """The stream ended complete; ``finish_reason`` as the model reported it (a stream without one is cut, and
    fails: the type keeps ``None`` for callers that build their own).

    ``usage`` is the last ``usage`` object the stream sent (token counts), if any: accounting, not part of the
    outcome, so it takes no part in equality.
    """

    finish_reason: str | None
    usage: Mapping[str, Any] | None = field(default=None, compare=False)


StreamEvent: TypeAlias = Delta | Finished
