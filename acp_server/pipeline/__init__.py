"""Streaming pipeline: one chat request through the openai SDK, guarded and retried.

Knows nothing of ACP or sessions. ``stream_chat(client, request, policy)`` is the entry point; model failures
surface only as :class:`ModelTurnError` subclasses (the caller's cancellation propagates as is). Runs on any
anyio backend: asyncio in production, trio's virtual clock in tests. The ids W1–W11 cited in its comments are the
watchdog requirements written out in ``docs/requirements.md``.
"""

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
)
from ._stream import stream_chat
from ._types import ChatRequest, Delta, Finished, RetryEvent, StreamEvent, StreamPolicy

__all__ = [
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
    "RetryClassification",
    "RetryEvent",
    "StreamContentError",
    "StreamEvent",
    "StreamInactivityTimeoutError",
    "StreamLifetimeExceededError",
    "StreamPolicy",
    "StreamTimeoutError",
    "classify_retry_error",
    "stream_chat",
]
