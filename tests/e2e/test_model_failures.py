"""Model failures as an ACP client sees them, in real time over real pipes and loopback HTTP (small idle values).

The watchdog turns a silent stream into a retried ETIMEDOUT; what reached the client is never replayed; an
exhausted turn answers -32603 with structured ``data``; a cancel during a backoff wait ends the prompt at once.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from acp_server.provider.offline import (
    Answer,
    ChunksThenSilent,
    EndWithoutFinish,
    FinishThenHold,
    HangAfterHeaders,
    LoopbackModel,
    RateLimited,
    RawSSE,
)

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "model_error.json").read_text())
IDLE = ["--stream-idle-timeout-ms", "200"]


async def _prompt(agent: AgentProcess, timeout: float = 20) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    session_id = await agent.new_session()
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "tell me"}]}
    return await agent.until_response(await agent.request_nowait("session/prompt", params), timeout)


def _texts(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["params"]["update"]["content"]["text"]
        for u in updates
        if u["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_silent_after_headers_three_times_fails_with_model_stream_timeout() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders(), HangAfterHeaders(), HangAfterHeaders())
        async with spawn_agent("--base-url", model.base_url, "--model", "m", *IDLE) as agent:
            await agent.initialize()
            response, updates = await _prompt(agent)
            assert len(model.requests) == 3
            assert len(model.disconnects) == 3
    kinds = [u["params"]["update"]["sessionUpdate"] for u in updates]
    assert kinds == ["session_info_update", "agent_thought_chunk", "agent_thought_chunk"]  # the title, two waits
    retries = [u["params"]["update"]["_meta"]["acpServer"]["retry"] for u in updates[1:]]
    assert [(r["attempt"], r["delayMs"]) for r in retries] == [(1, 1000), (2, 2000)]
    error = response["error"]
    assert error["code"] == -32603
    data = error["data"]
    assert data["errorKind"] == "model_stream_timeout"
    assert (data["transportCode"], data["phase"], data["attempts"], data["chunksReceived"]) == (
        "ETIMEDOUT",
        "before_first_chunk",
        3,
        0,
    )
    jsonschema.validate(data, SCHEMA)
    gaps = [b.received_at - a.received_at for a, b in zip(model.requests, model.requests[1:], strict=False)]
    assert 1.1 <= gaps[0] < 1.9 and 2.1 <= gaps[1] < 2.9  # idle 0.2 s + 1 s, idle 0.2 s + 2 s


async def test_silent_once_then_normal_recovers_with_the_full_answer() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders(), Answer(text="all of it", reasoning=""))
        async with spawn_agent("--base-url", model.base_url, "--model", "m", *IDLE) as agent:
            await agent.initialize()
            response, updates = await _prompt(agent)
            assert len(model.requests) == 2
    assert response["result"]["stopReason"] == "end_turn"
    assert _texts(updates) == "all of it"


async def test_stall_after_chunks_surfaces_without_replay() -> None:
    async with LoopbackModel() as model:
        model.enqueue(ChunksThenSilent(5))
        async with spawn_agent("--base-url", model.base_url, "--model", "m", *IDLE) as agent:
            await agent.initialize()
            response, updates = await _prompt(agent)
            assert len(model.requests) == 1
            await model.wait_for_disconnects(1)
    chunks = [u for u in updates if u["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert len(chunks) == 5
    data = response["error"]["data"]
    assert (data["errorKind"], data["phase"], data["attempts"], data["chunksReceived"]) == (
        "model_stream_timeout",
        "mid_stream",
        1,
        5,
    )
    jsonschema.validate(data, SCHEMA)


async def test_rate_limit_honours_retry_after() -> None:
    async with LoopbackModel() as model:
        model.enqueue(RateLimited(retry_after="1"), Answer(text="after the wait", reasoning=""))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            response, updates = await _prompt(agent)
    assert response["result"]["stopReason"] == "end_turn"
    assert _texts(updates) == "after the wait"
    gap = model.requests[1].received_at - model.requests[0].received_at
    assert gap >= 0.95  # never before Retry-After (the exact wait: pipeline/test_loopback_virtual.py, virtual time)


async def test_cancel_during_backoff_wait_is_immediate() -> None:
    async with LoopbackModel() as model:
        model.enqueue(RateLimited(retry_after="30"))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
            prompt_id = await agent.request_nowait("session/prompt", params)
            await model.wait_for_requests(1)
            await anyio.sleep(0.2)  # the turn is now in its 30 s backoff wait
            await agent.notify("session/cancel", {"sessionId": session_id})
            response, _ = await agent.until_response(prompt_id, timeout=15)  # not the 30 s wait: it is cut short
            assert response["result"] == {"stopReason": "cancelled"}
            assert len(model.requests) == 1


async def test_a_base_url_without_v1_gets_a_404_that_says_so() -> None:
    async with LoopbackModel() as model:
        root = model.base_url.removesuffix("/v1")  # what a new user pastes: the server's address
        async with spawn_agent("--base-url", root, "--model", "m") as agent:
            await agent.initialize()
            response, _ = await _prompt(agent)
    error = response["error"]
    assert error["data"]["errorKind"] == "model_http_error" and error["data"]["status"] == 404
    assert (error["data"]["endpoint"], error["data"]["model"]) == (root, "m")
    assert error["message"].startswith(f"The model endpoint {root} (model 'm') answered HTTP 404")
    assert f"try --base-url {root}/v1" in error["message"]
    jsonschema.validate(error["data"], SCHEMA)


@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    """A port that refuses connections during the block: bound (so no other socket can take it), never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


async def test_nothing_listening_fails_fast_naming_host_and_port() -> None:
    with _refusing_port() as port:
        base_url = f"http://127.0.0.1:{port}/v1"
        async with spawn_agent("--base-url", base_url, "--api-key", "sk-never-shown-1234", "--model", "m") as agent:
            await agent.initialize()
            response, _ = await _prompt(agent)
        data = response["error"]["data"]
        got = (data["errorKind"], data["transportCode"], data["attempts"])
        assert got == ("model_transport_error", "ECONNREFUSED", 2)  # one quick retry (it took 22-26 s of backoff)
        assert data["endpoint"] == base_url
        message = response["error"]["message"]
        assert f"model endpoint {base_url} (model 'm') failed (ECONNREFUSED: nothing is listening" in message
        assert "sk-never-shown" not in json.dumps(response) and b"sk-never-shown" not in agent.stderr
        jsonschema.validate(data, SCHEMA)


async def test_start_up_names_the_endpoint_and_model_never_the_key() -> None:
    with _refusing_port() as port:
        base_url = f"http://127.0.0.1:{port}/v1"
        async with spawn_agent("--base-url", base_url, "--api-key", "sk-never-shown-1234", "--model", "m") as agent:
            await agent.initialize()
            await agent.close_stdin()
            await agent.process.wait()
        log = agent.stderr.decode()
        assert f"model: 'm' at {base_url}" in log
        assert "sk-never-shown" not in log


def _data(escaped_content: str | None = None, finish: str | None = None) -> str:
    delta = "{}" if escaped_content is None else '{"content":"%s"}' % escaped_content  # noqa: UP031
    finish_json = "null" if finish is None else f'"{finish}"'
    return f'data: {{"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish_json}}}]}}\n\n'


async def test_an_emoji_split_into_two_escaped_halves_streams_as_one_character() -> None:
    parts = (_data("hi \\ud83d"), _data("\\ude00"), _data(finish="stop"), "data: [DONE]\n\n")
    async with LoopbackModel() as model:
        model.enqueue(RawSSE(parts))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            response, updates = await _prompt(agent)
    assert response.get("result", {}).get("stopReason") == "end_turn", response
    assert _texts(updates) == "hi \U0001f600"


async def test_a_stream_cut_without_finish_is_a_transport_error_after_what_streamed() -> None:
    async with LoopbackModel() as model:
        model.enqueue(EndWithoutFinish(3))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            response, updates = await _prompt(agent)
            assert len(model.requests) == 1
    assert len([u for u in updates if u["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]) == 3
    data = response["error"]["data"]
    assert (data["errorKind"], data["phase"], data["reason"], data["chunksReceived"]) == (
        "model_transport_error",
        "mid_stream",
        "eof_without_finish",
        3,
    )
    jsonschema.validate(data, SCHEMA)


async def test_finish_then_a_held_connection_ends_the_turn_without_waiting_for_the_idle_timeout() -> None:
    async with LoopbackModel() as model:
        model.enqueue(FinishThenHold("complete answer"))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:  # idle: 120 s
            await agent.initialize()
            response, updates = await _prompt(agent, timeout=20)
    assert response.get("result", {}).get("stopReason") == "end_turn", response
    assert _texts(updates) == "complete answer"


async def test_invalid_json_in_a_data_line_is_a_structured_content_error() -> None:
    async with LoopbackModel() as model:
        model.enqueue(RawSSE((_data("kept"), "data: {not json\n\n")))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            response, _ = await _prompt(agent)
    assert b"Traceback" not in agent.stderr
    data = response["error"]["data"]
    assert (data["errorKind"], data["reason"], data["phase"]) == ("model_stream_content", "invalid_json", "mid_stream")
    jsonschema.validate(data, SCHEMA)


async def test_a_retry_after_longer_than_the_cap_fails_fast_with_the_providers_time() -> None:
    async with LoopbackModel() as model:
        model.enqueue(RateLimited(retry_after="99999"))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            response, _ = await _prompt(agent, timeout=10)
            assert len(model.requests) == 1
    data = response["error"]["data"]
    assert (data["errorKind"], data["retryAfterMs"], data["retryable"]) == ("model_rate_limited", 99_999_000, True)
    jsonschema.validate(data, SCHEMA)
