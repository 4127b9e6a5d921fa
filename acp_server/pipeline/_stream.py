"""Execute one streamed chat request and yield its deltas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ._types import ChatRequest, Delta, Finished, StreamEvent, StreamPolicy

if TYPE_CHECKING:
    from openai import AsyncOpenAI


async def stream_chat(
    client: AsyncOpenAI, request: ChatRequest, policy: StreamPolicy | None = None
) -> AsyncIterator[StreamEvent]:
    """Yield :class:`Delta` values then exactly one :class:`Finished`; the HTTP response is closed on every exit."""
    stream: Any = await client.chat.completions.create(
        model=request.model, messages=request.messages, stream=True, **request.extra  # type: ignore[call-overload]
    )
    finish_reason: str | None = None
    try:
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                reasoning = getattr(delta, "reasoning_content", None) or ""
                text = delta.content or ""
                if text or reasoning:
                    yield Delta(text=text, reasoning=reasoning)
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
    finally:
        await stream.close()
    yield Finished(finish_reason)
