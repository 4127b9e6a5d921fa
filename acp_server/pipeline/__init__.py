"""Streaming pipeline: one chat request over the openai SDK's client, guarded and retried.

Knows nothing of ACP or sessions. ``stream_chat(client, request, policy)`` (an async generator) and
``run_chat(client, request, policy, on_delta)`` (a callback per delta, the lifetime cap covering the callbacks)
are the entry points; model failures surface only as :class:`ModelTurnError` subclasses (the caller's
cancellation propagates as is). Runs on any anyio backend: asyncio in production, trio's virtual clock in tests.
The ids W1–W11 cited in its comments are the watchdog requirements written out in ``docs/requirements.md``.
"""

from ._body import RequestEncoder
from ._classify import RetryClassification, classify_retry_error
from ._exceptions import (
    ModelHTTPError,
    ModelProviderError,
    ModelRateLimitedError,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    ModelTurnError,
    PipelineError,
    StreamContentError,
    StreamInactivityTimeoutError,
    StreamLifetimeExceededError,
    StreamTimeoutError,
    StreamTruncatedError,
)
from ._stream import run_chat, stream_chat
from ._types import (
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_MAX_LIFETIME_MS,
    ChatRequest,
    Delta,
    Finished,
    RetryEvent,
    StreamEvent,
    StreamPolicy,
    ToolCallFragment,
)

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_MS",
    "DEFAULT_MAX_LIFETIME_MS",
    "ChatRequest",
    "Delta",
    "Finished",
    "ModelHTTPError",
    "ModelProviderError",
    "ModelRateLimitedError",
    "ModelStreamContentError",
    "ModelStreamTimeoutError",
    "ModelTransportError",
    "ModelTurnError",
    "PipelineError",
    "RequestEncoder",
    "RetryClassification",
    "RetryEvent",
    "StreamContentError",
    "StreamEvent",
    "StreamInactivityTimeoutError",
    "StreamLifetimeExceededError",
    "StreamPolicy",
    "StreamTimeoutError",
    "StreamTruncatedError",
    "ToolCallFragment",
    "classify_retry_error",
    "run_chat",
    "stream_chat",
]
