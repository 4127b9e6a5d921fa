"""The response to one chat request in OpenAI terms: SSE chunks, comments, ``[DONE]``, or a JSON body."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from . import _wire
from ._http import HttpConnection

_SSE_HEADERS = (("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache"))


def _json_bytes(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


async def send_json(
    http: HttpConnection, status: int, payload: Mapping[str, Any], headers: Iterable[tuple[str, str]] = ()
) -> None:
    """A complete JSON response."""
    await http.send_response(status, [("content-type", "application/json"), *headers], _json_bytes(payload))


class Exchange:
    """Writes one response; ``chunks_sent`` counts the ``chat.completion.chunk`` events written.

    ``index`` is the request's position in ``LoopbackModel.requests``.
    """

    def __init__(self, http: HttpConnection, *, index: int, body: Mapping[str, Any], model: str) -> None:
        self._http = http
        self.index = index
        self._id = f"chatcmpl-loopback-{index}"
        self._model = model
        self.prompt = _wire.last_user_text(body)
        self.streaming = body.get("stream") is True
        options = body.get("stream_options")
        wants_usage = isinstance(options, Mapping) and options.get("include_usage") is True
        self._include_usage = self.streaming and wants_usage
        self._prompt_tokens = _wire.count_prompt_words(body)
        self.max_tokens = _wire.output_bound(body)  # the answer's bound in tokens (words here); None: none
        self._output_chunks = 0
        self.usage: tuple[int, int] | None = None  # (prompt, completion) tokens to report instead of the counted
        self._role_sent = False
        self.chunks_sent = 0

    async def start_stream(self) -> None:
        """``200`` with SSE headers; the body is chunked and stays open until ``end()``."""
        await self._http.start_response(200, _SSE_HEADERS)

    async def _send_event(self, payload: Mapping[str, Any]) -> None:
        await self._http.send_body_part(b"data: " + _json_bytes(payload) + b"\n\n")
        self.chunks_sent += 1

    async def send_chunk(
        self,
        *,
        content: str | None = None,
        reasoning: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        finish_reason: str | None = None,
    ) -> None:
        """One chunk; the first of the stream also carries ``role: assistant``."""
        delta: dict[str, Any] = {}
        if not self._role_sent:
            delta["role"] = "assistant"
            self._role_sent = True
        if reasoning is not None:
            delta["reasoning_content"] = reasoning
        if content is not None:
            delta["content"] = content
        if tool_calls is not None:
            delta["tool_calls"] = tool_calls
        if content is not None or reasoning is not None or tool_calls is not None:
            self._output_chunks += 1
        await self._send_event(_wire.chunk(self._id, self._model, delta, finish_reason))

    async def send_comment(self, text: str) -> None:
        await self._http.send_body_part(f": {text}\n\n".encode())

    async def finish(self, finish_reason: str | None) -> None:
        """The finish chunk (unless None), the usage chunk when asked for, ``[DONE]``, end of body."""
        await self.send_finish(finish_reason)
        await self.send_done()
        await self.end()

    async def send_finish(self, finish_reason: str | None) -> None:
        """The finish chunk (unless None) and the usage chunk when asked for; nothing after them."""
        if finish_reason is not None:
            await self.send_chunk(finish_reason=finish_reason)
        if self._include_usage:
            usage = _wire.usage(*(self.usage or (self._prompt_tokens, self._output_chunks)))
            await self._send_event(_wire.usage_chunk(self._id, self._model, usage))

    async def send_raw(self, part: str | bytes) -> None:
        """``part`` as is in the body; one starting with ``data:`` that is not ``[DONE]`` counts as a chunk."""
        data = part.encode() if isinstance(part, str) else part
        await self._http.send_body_part(data)
        if data.startswith(b"data:") and data[5:].strip()[:6] != b"[DONE]":
            self.chunks_sent += 1

    async def send_done(self) -> None:
        await self._http.send_body_part(b"data: [DONE]\n\n")

    async def end(self) -> None:
        """End the body cleanly, whatever was or was not sent before."""
        await self._http.end_response()

    async def send_completion(
        self,
        *,
        content: str,
        reasoning: str,
        finish_reason: str | None,
        tool_calls: list[dict[str, Any]] | None = None,
    ) -> None:
        """A non-streamed answer: one ``chat.completion`` body; with ``tool_calls``, an empty content is null."""
        words = len(_wire.split_words(content + " " + reasoning)) + len(tool_calls or ())
        payload = _wire.completion(
            self._id,
            self._model,
            content=None if tool_calls and not content else content,
            reasoning=reasoning,
            finish_reason=finish_reason,
            usage_=_wire.usage(self._prompt_tokens, words),
            tool_calls=tool_calls,
        )
        await self.send_json(200, payload)

    async def send_json(
        self, status: int, payload: Mapping[str, Any], headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        await send_json(self._http, status, payload, headers)

    async def send_body(
        self, status: int, body: bytes, content_type: str, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        await self._http.send_response(status, [("content-type", content_type), *headers], body)

    async def abort(self) -> None:
        await self._http.abort()
