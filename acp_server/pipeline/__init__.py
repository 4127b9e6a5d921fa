"""Streaming pipeline: one chat request through the openai SDK, guarded; knows nothing of ACP or sessions."""

from ._stream import stream_chat
from ._types import ChatRequest, Delta, Finished, StreamEvent, StreamPolicy

__all__ = ["ChatRequest", "Delta", "Finished", "StreamEvent", "StreamPolicy", "stream_chat"]
