"""What counts as a finished answer, with the real SDK over loopback sockets on trio's virtual clock.

Complete only with a finish reason; ``[DONE]`` is optional after it (a held connection ends after the finish
grace); a cut stream is a transport error; broken data lines are structured content errors; text never carries
a lone surrogate; the lifetime cap holds while the consumer of :func:`run_chat` is blocked.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from acp_server.pipeline import (
    Delta,
    Finished,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    StreamPolicy,
    run_chat,
)
from acp_server.provider.offline import Answer, FinishThenHold, RawSSE, SlowDrip

from ._loopback import REQUEST, loopback, run_turn

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    pytest.mark.virtual_time(autojump=0.05),
]

DEFAULTS = StreamPolicy(jitter_source=lambda: 0.5)
EMOJI = "\U0001f600"


def data(delta: dict[str, Any] | None = None, finish: str | None = None, *, escaped: str | None = None) -> str:
    """One SSE chunk event; ``escaped`` is spliced into the JSON as is (``"\\ud83d"`` escapes, say)."""
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    text = json.dumps({"object": "chat.completion.chunk", "choices": [choice]})
    if escaped is not None:
        text = text.replace('"@"', escaped)
    return f"data: {text}\n\n"


DONE = "data: [DONE]\n\n"


# --- (2) split surrogate pairs ------------------------------------------------------------------------------------


async def test_a_pair_split_across_two_chunks_is_joined_in_content_and_in_reasoning_separately() -> None:
    parts = (
        data({"reasoning_content": "@"}, escaped='"hmm \\ud83d"'),
        data({"content": "@"}, escaped='"hi \\ud83d"'),  # a content half between the two reasoning halves
        data({"reasoning_content": "@"}, escaped='"\\ude00 ok"'),
        data({"content": "@"}, escaped='"\\ude00!"'),
        data(finish="stop"),
        DONE,
    )
    async with loopback() as (model, client):
        model.enqueue(RawSSE(parts))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.error is None
    assert outcome.text == f"hi {EMOJI}!"
    assert "".join(d.reasoning for d in outcome.deltas) == f"hmm {EMOJI} ok"
    assert outcome.finished == [Finished("stop")]
    for delta in outcome.deltas:
        (delta.text + delta.reasoning).encode("utf-8")  # no lone surrogate reached the caller


async def test_lone_halves_become_replacement_characters_never_an_error() -> None:
    parts = (
        data({"content": "@"}, escaped='"a\\ude00b"'),  # a low half alone
        data({"content": "@"}, escaped='"c\\ud83d"'),  # a high half, then the stream finishes
        data(finish="stop"),
        DONE,
    )
    async with loopback() as (model, client):
        model.enqueue(RawSSE(parts))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.error is None
    assert outcome.text == "a\ufffdbc\ufffd"
    assert outcome.finished == [Finished("stop")]


# --- (3) complete only with a finish reason -----------------------------------------------------------------------


async def test_finish_then_a_held_connection_completes_after_the_grace_not_the_idle_timeout() -> None:
    async with loopback() as (model, client):
        model.enqueue(FinishThenHold("all of it"))
        outcome = await run_turn(client, DEFAULTS)  # idle 120 s
        (disconnect,) = await model.wait_for_disconnects(1)
    assert outcome.error is None
    assert outcome.text == "all of it"
    assert outcome.finished == [Finished("stop")]
    t0 = model.requests[0].received_at
    assert outcome.ended - t0 == 1.0  # the default finish grace
    assert disconnect.at - t0 == 1.0


async def test_finish_grace_zero_closes_at_once_and_a_usage_chunk_may_follow() -> None:
    usage = 'data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1}}\n\n'
    async with loopback() as (model, client):
        model.enqueue(RawSSE((data({"content": "x"}), data(finish="length"), usage), then="hold"))
        model.enqueue(RawSSE((data({"content": "y"}), data(finish="stop")), then="hold"))
        with_usage = await run_turn(client, DEFAULTS)
        at_once = await run_turn(client, StreamPolicy(finish_grace_ms=0))
        await model.wait_for_disconnects(2)
    assert (with_usage.text, with_usage.finished) == ("x", [Finished("length")])
    assert (at_once.text, at_once.finished, at_once.ended - at_once.started) == ("y", [Finished("stop")], 0.0)


async def test_a_reset_or_garbage_after_the_finish_changes_nothing() -> None:
    async with loopback() as (model, client):
        model.enqueue(RawSSE((data({"content": "done"}), data(finish="stop"), "data: {oops\n\n"), then="reset"))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.error is None
    assert (outcome.text, outcome.finished) == ("done", [Finished("stop")])


async def test_a_cut_stream_before_anything_reached_the_caller_is_retried_like_a_reset() -> None:
    async with loopback() as (model, client):
        model.enqueue(RawSSE((data({"role": "assistant"}),)), Answer(text="second try", reasoning=""))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.error is None
    assert outcome.text == "second try"
    assert model.requests[1].received_at - model.requests[0].received_at == 1.0


async def test_done_without_a_finish_reason_is_a_cut_stream_too() -> None:
    async with loopback() as (model, client):
        model.enqueue(RawSSE((data({"content": "half"}), DONE)))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.text == "half"
    assert isinstance(outcome.error, ModelTransportError)
    assert (outcome.error.phase, outcome.error.reason) == ("mid_stream", "eof_without_finish")


@pytest.mark.parametrize(
    "garbage",
    ["data: {not json\n\n", b"data: {\"choices\": [{\"delta\": {\"content\": \"\xff\"}}]}\n\n", "data: 42\n\n"],
)
async def test_a_broken_data_line_is_a_content_error_retried_once_while_nothing_was_delivered(
    garbage: str | bytes,
) -> None:
    async with loopback() as (model, client):
        model.enqueue(RawSSE((garbage,)), RawSSE((garbage,)))
        outcome = await run_turn(client, DEFAULTS)
    assert isinstance(outcome.error, ModelStreamContentError)
    details = outcome.error.details()
    reason = "invalid_chunk" if garbage == "data: 42\n\n" else "invalid_json"
    assert (details["reason"], details["attempts"], details["retryable"]) == (reason, 2, True)
    assert len(model.requests) == 2


async def test_a_broken_data_line_after_delivered_text_is_not_replayed() -> None:
    async with loopback() as (model, client):
        model.enqueue(RawSSE((data({"content": "kept"}), "data: {not json\n\n")), Answer(text="never"))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.text == "kept"
    assert isinstance(outcome.error, ModelStreamContentError)
    assert outcome.error.details()["phase"] == "mid_stream"
    assert "not JSON" in str(outcome.error)
    assert len(model.requests) == 1


# --- (6) the lifetime cap holds while the consumer is blocked --------------------------------------------------


async def test_run_chat_closes_the_request_at_the_lifetime_cap_while_the_consumer_never_returns() -> None:
    policy = StreamPolicy(max_lifetime_ms=5_000, stream_max_retries=0)
    got: list[Delta] = []

    async def never_returns(delta: Delta) -> None:
        got.append(delta)
        await anyio.sleep_forever()  # the consumer's reader stopped reading: emit blocks for good

    async with loopback() as (model, client):
        model.enqueue(SlowDrip(interval_s=1.0, text="one two three four five six seven eight nine ten"))
        with anyio.fail_after(60), pytest.raises(ModelStreamTimeoutError) as caught:
            await run_chat(client, REQUEST, policy, never_returns)
        ended = anyio.current_time()
        (disconnect,) = await model.wait_for_disconnects(1)
    t0 = model.requests[0].received_at
    assert ended - t0 == 5.0 and disconnect.at - t0 == 5.0
    assert got == [Delta(text="one")]
    details = caught.value.details()
    assert (details["maxLifetimeMs"], details["phase"], details["chunksReceived"]) == (5_000, "mid_stream", 1)


async def test_run_chat_gives_the_caller_its_own_cancellation_over_the_cap() -> None:
    policy = StreamPolicy(max_lifetime_ms=5_000)

    async def never_returns(delta: Delta) -> None:
        await anyio.sleep_forever()

    async with loopback() as (model, client):
        model.enqueue(SlowDrip(interval_s=1.0, text="a b c d e f g"))
        with anyio.move_on_after(5) as scope:  # the caller's deadline is the cap's instant
            await run_chat(client, REQUEST, policy, never_returns)
        await model.wait_for_disconnects(1)
    assert scope.cancelled_caught


async def test_run_chat_delivers_a_normal_answer_and_returns_its_finish() -> None:
    got: list[Delta] = []

    async def collect(delta: Delta) -> None:
        got.append(delta)

    async with loopback() as (model, client):
        model.enqueue(Answer(text="just fine", reasoning="r"))
        finished = await run_chat(client, REQUEST, DEFAULTS, collect)
    assert finished == Finished("stop")
    assert got == [Delta(reasoning="r"), Delta(text="just"), Delta(text=" fine")]
