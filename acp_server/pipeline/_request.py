"""Building the request and sending it: the body once per turn, then one POST per attempt up to the headers.

The body is one ``json.dumps`` of plain values, no SDK transform; it is posted through the SDK's client
(``client.post``: its base URL, auth, headers, timeouts, and its exception classes for an error status or a failed
connection). Invariant: a response that is not SSE never reaches the reader (a non-retryable ``non_sse``).
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, cast

import anyio

from ._body import dumps_json
from ._chunks import Attempt
from ._events import Events
from ._exceptions import StreamContentError, redact
from ._types import ChatRequest

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncOpenAI

__all__ = ["open_events", "request_body", "without_sdk_retries"]

logger = logging.getLogger("acp_server.pipeline")

_PREVIEW_BYTES = 200
"""How much of a non-SSE body is quoted in the error."""

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


def without_sdk_retries(client: AsyncOpenAI) -> AsyncOpenAI:
    """The pipeline is the only retry layer: the SDK's own retries off (a cheap copy sharing the pool)."""
    if getattr(client, "max_retries", 0):
        return client.with_options(max_retries=0)
    return client


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


async def open_events(
    client: AsyncOpenAI,
    body: bytes,
    attempt: Attempt,
    secrets: tuple[str | None, ...],
    close_s: float,
) -> Events:
    """The request, sent through the SDK's client, up to the response headers (``attempt.opened`` then); a 200 that
    is not SSE is a non-retryable content error, its first bytes quoted (secrets redacted)."""
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
        return Events(response, secrets)
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
