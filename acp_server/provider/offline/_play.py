"""Perform a scripted behaviour as the response to one chat request."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from itertools import chain, cycle, islice, zip_longest
from typing import Any, assert_never

import anyio

from . import _wire
from ._behaviours import (
    Answer,
    Behaviour,
    ChunksThenSilent,
    ConnectionReset,
    EmptyStream,
    EndWithoutFinish,
    ErrorStatus,
    FinishThenHold,
    HangAfterHeaders,
    KeepAliveOnly,
    NonSSE,
    PartialToolCalls,
    RateLimited,
    RawSSE,
    ScriptedCall,
    SlowDrip,
    ToolCalls,
)
from ._exchange import Exchange


def _derived_words(exchange: Exchange, k: int) -> Iterator[str]:
    """``k`` content chunks from the derived answer, cycling through its words when ``k`` exceeds them."""
    return islice(cycle(_wire.split_words(_wire.derived_answer(exchange.prompt))), k)


async def _content_chunks(exchange: Exchange, k: int) -> None:
    for word in _derived_words(exchange, k):
        await exchange.send_chunk(content=word)


async def _answer(answer: Answer, exchange: Exchange) -> None:
    exchange.usage = answer.usage
    text = _wire.derived_answer(exchange.prompt) if answer.text is None else answer.text
    reasoning = _wire.DEFAULT_REASONING if answer.reasoning is None else answer.reasoning
    thoughts, words = _wire.split_words(reasoning), _wire.split_words(text)
    finish_reason = answer.finish_reason
    bound = exchange.max_tokens
    if bound is not None and len(thoughts) + len(words) > bound:  # each chunk counts as a token; cut at the bound
        thoughts = thoughts[:bound]
        words = words[: bound - len(thoughts)]
        text, reasoning, finish_reason = "".join(words), "".join(thoughts), "length"
    answer = dataclasses.replace(answer, finish_reason=finish_reason)
    if not exchange.streaming:
        chunks = len(thoughts) + len(words) + (answer.finish_reason is not None)
        await anyio.sleep(answer.chunk_delay_s * chunks)
        await exchange.send_completion(content=text, reasoning=reasoning, finish_reason=answer.finish_reason)
        return
    await exchange.start_stream()
    for thought in thoughts:
        await _delay(answer.chunk_delay_s)
        await exchange.send_chunk(reasoning=thought)
    for word in words:
        await _delay(answer.chunk_delay_s)
        await exchange.send_chunk(content=word)
    if answer.finish_reason is not None:
        await _delay(answer.chunk_delay_s)
    await exchange.finish(answer.finish_reason)


def _ids(calls: tuple[ScriptedCall, ...], exchange: Exchange) -> list[str]:
    return [c.id if c.id is not None else _wire.call_id(exchange.index, i) for i, c in enumerate(calls)]


def _fragments(
    calls: tuple[ScriptedCall, ...], exchange: Exchange, fragment_size: int | None, interleave: bool
) -> list[dict[str, Any]]:
    """The ``delta.tool_calls`` entries of ``calls`` in send order, one per chunk."""
    per_call = [
        _wire.tool_call_fragments(i, call_id, call.name, call.arguments_text, fragment_size)
        for i, (call, call_id) in enumerate(zip(calls, _ids(calls, exchange), strict=True))
    ]
    if not interleave:
        return list(chain.from_iterable(per_call))
    return [f for round_ in zip_longest(*per_call) for f in round_ if f is not None]


async def _tool_calls(behaviour: ToolCalls, exchange: Exchange) -> None:
    exchange.usage = behaviour.usage
    if not exchange.streaming:
        calls = [
            _wire.tool_call(call_id, call.name, call.arguments_text)
            for call, call_id in zip(behaviour.calls, _ids(behaviour.calls, exchange), strict=True)
        ]
        await exchange.send_completion(
            content=behaviour.text, reasoning="", finish_reason=behaviour.finish_reason, tool_calls=calls
        )
        return
    await exchange.start_stream()
    for word in _wire.split_words(behaviour.text):
        await exchange.send_chunk(content=word)
    for fragment in _fragments(behaviour.calls, exchange, behaviour.fragment_size, behaviour.interleave):
        if behaviour.fragment_delay_s:
            await anyio.sleep(behaviour.fragment_delay_s)
        await exchange.send_chunk(tool_calls=[fragment])
    await exchange.finish(behaviour.finish_reason)


async def _partial_tool_calls(behaviour: PartialToolCalls, exchange: Exchange) -> None:
    await exchange.start_stream()
    fragments = _fragments(behaviour.calls, exchange, behaviour.fragment_size, interleave=False)
    for fragment in fragments[: behaviour.fragments]:
        await exchange.send_chunk(tool_calls=[fragment])
    if behaviour.then == "hold":
        await anyio.sleep_forever()
    elif behaviour.then == "reset":
        await exchange.abort()
    else:
        await exchange.end()


async def _delay(seconds: float) -> None:
    if seconds > 0:
        await anyio.sleep(seconds)


async def play(behaviour: Behaviour, exchange: Exchange) -> None:
    """Respond with ``behaviour``; return once the response ended or the connection was aborted.

    Silent behaviours sleep forever: the caller cancels them when the client disconnects. Behaviours other
    than ``Answer`` and ``ToolCalls`` ignore the request's ``stream`` flag (they describe a stream or an error
    either way).
    """
    match behaviour:
        case Answer():
            await _answer(behaviour, exchange)
        case HangAfterHeaders():
            await exchange.start_stream()
            await anyio.sleep_forever()
        case ChunksThenSilent(k=k):
            await exchange.start_stream()
            await _content_chunks(exchange, k)
            await anyio.sleep_forever()
        case KeepAliveOnly(interval_s=interval_s):
            await exchange.start_stream()
            while True:
                await anyio.sleep(interval_s)
                await exchange.send_comment("keep-alive")
        case SlowDrip(interval_s=interval_s, text=text):
            await exchange.start_stream()
            for word in _wire.split_words(text):
                await anyio.sleep(interval_s)
                await exchange.send_chunk(content=word)
            await exchange.finish("stop")
        case RateLimited(retry_after=retry_after):
            headers = [] if retry_after is None else [("retry-after", retry_after)]
            body = _wire.error_body("Rate limit reached (loopback model)", "requests", "rate_limit_exceeded")
            await exchange.send_json(429, body, headers)
        case ErrorStatus(status=status, message=message):
            text = f"Scripted server error {status} (loopback model)" if message is None else message
            await exchange.send_json(status, _wire.error_body(text, "server_error"))
        case ConnectionReset(after_chunks=after_chunks):
            if after_chunks:
                await exchange.start_stream()
                await _content_chunks(exchange, after_chunks)
            await exchange.abort()
        case NonSSE(body=body, content_type=content_type):
            await exchange.send_body(200, body.encode(), content_type)
        case EndWithoutFinish(k=k):
            await exchange.start_stream()
            await _content_chunks(exchange, k)
            await exchange.end()
        case EmptyStream():
            await exchange.start_stream()
            await exchange.send_done()
            await exchange.end()
        case FinishThenHold(text=text, finish_reason=finish_reason):
            await exchange.start_stream()
            for word in _wire.split_words(text):
                await exchange.send_chunk(content=word)
            await exchange.send_finish(finish_reason)
            await anyio.sleep_forever()
        case RawSSE(parts=parts, then=then):
            await exchange.start_stream()
            for part in parts:
                await exchange.send_raw(part)
            if then == "hold":
                await anyio.sleep_forever()
            elif then == "reset":
                await exchange.abort()
            else:
                await exchange.end()
        case ToolCalls():
            await _tool_calls(behaviour, exchange)
        case PartialToolCalls():
            await _partial_tool_calls(behaviour, exchange)
        case _:
            assert_never(behaviour)
