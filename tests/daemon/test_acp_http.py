"""ACP JSON-RPC over HTTP (``/acp``): the stdio dispatcher and handlers behind HTTP framing, one bridge for all."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

from acp_server.config import Settings
from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip

from ..e2e.test_hostile_input import CASES, SID
from ._support import Served, running_daemon

pytestmark = pytest.mark.anyio

HEADER = "Acp-Connection-Id"


class AcpHttpClient:
    def __init__(self, served: Served) -> None:
        self.client = served.client
        self.connection: str | None = None
        self._id = 0

    def _headers(self) -> dict[str, str]:
        return {HEADER: self.connection} if self.connection else {}

    def message(self, method: str, params: Any) -> dict[str, Any]:
        self._id += 1
        return {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}

    async def post(self, message: dict[str, Any] | bytes) -> httpx2.Response:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return await self.client.post(
            "/acp", content=body, headers={"content-type": "application/json", **self._headers()}
        )

    async def initialize(self) -> dict[str, Any]:
        response = await self.post(self.message("initialize", {"protocolVersion": 1}))
        assert response.status_code == 200
        self.connection = response.headers[HEADER]
        result: dict[str, Any] = response.json()["result"]
        return result

    async def new_session(self) -> str:
        response = await self.post(self.message("session/new", {"cwd": "/tmp", "mcpServers": []}))
        return str(response.json()["result"]["sessionId"])

    def prompt_message(self, session_id: str, text: str = "hi") -> dict[str, Any]:
        return self.message("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})

    async def stream(self, message: dict[str, Any]) -> tuple[httpx2.Response, list[dict[str, Any]]]:
        """POST a streaming request; returns the response and every SSE message (or the JSON reply)."""
        body = json.dumps(message).encode()
        headers = {"content-type": "application/json", **self._headers()}
        async with self.client.stream("POST", "/acp", content=body, headers=headers) as response:
            if not response.headers["content-type"].startswith("text/event-stream"):
                await response.aread()
                return response, [response.json()]
            events = [json.loads(sse.data) async for sse in httpx2.EventSource(response)]
            return response, events


async def test_initialize_new_session_and_a_streamed_prompt_with_the_response_last() -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="streamed over http", reasoning="hmm"))
        async with running_daemon(model) as served:
            acp = AcpHttpClient(served)
            init = await acp.initialize()
            assert init["protocolVersion"] == 1
            session_id = await acp.new_session()
            response, messages = await acp.stream(acp.prompt_message(session_id))
    assert response.status_code == 200
    *updates, last = messages
    assert last["result"] == {"stopReason": "end_turn"}
    assert all(m["method"] == "session/update" for m in updates)
    text = "".join(
        u["params"]["update"]["content"]["text"]
        for u in updates
        if u["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    assert text == "streamed over http"


async def test_seven_concurrent_prompts_five_streams_two_refusals_one_counter_with_rest() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="slow " * 30))
        async with running_daemon(model) as served:
            acp = AcpHttpClient(served)
            await acp.initialize()
            session_id = await acp.new_session()
            results: dict[int, tuple[httpx2.Response, list[dict[str, Any]]]] = {}
            refused = anyio.Event()

            async def send(i: int) -> None:
                results[i] = await acp.stream(acp.prompt_message(session_id, f"p{i}"))
                if sum(1 for r, _ in results.values() if "text/event-stream" not in r.headers["content-type"]) == 2:
                    refused.set()

            async with anyio.create_task_group() as tg:
                for i in range(7):
                    tg.start_soon(send, i)
                with anyio.fail_after(10):
                    await refused.wait()
                rest = await served.prompt(session_id)  # REST sees the same full counter
                assert rest.status_code == 503
                assert rest.json()["pendingCount"] == 5
    streams = [i for i, (r, _) in results.items() if r.headers["content-type"].startswith("text/event-stream")]
    refusals = [results[i] for i in results if i not in streams]
    assert len(streams) == 5 and len(refusals) == 2
    for response, (body,) in refusals:
        assert response.status_code == 200
        assert response.headers["retry-after"] == "5"
        assert body["error"]["code"] == -32603
        assert body["error"]["data"] == {
            "errorKind": "prompt_queue_full",
            "sessionId": session_id,
            "limit": 5,
            "pendingCount": 5,
            "retryable": True,
        }
    for i in streams:
        assert results[i][1][-1]["result"] == {"stopReason": "end_turn"}


async def test_rest_prompts_count_against_acp_prompts() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="slow " * 30))
        async with running_daemon(model) as served:
            acp = AcpHttpClient(served)
            await acp.initialize()
            session_id = await acp.new_session()
            for _ in range(5):
                assert (await served.prompt(session_id)).status_code == 202
            response = await acp.post(acp.prompt_message(session_id))
            assert response.headers["content-type"].startswith("application/json")
            assert response.json()["error"]["data"]["pendingCount"] == 5
            await served.client.post(f"/session/{session_id}/cancel")


async def test_dropping_the_http_connection_cancels_the_prompt_and_frees_its_slot() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="long " * 500), Answer(text="next", reasoning=""))
        async with running_daemon(model, settings=Settings(max_pending_prompts_per_session=1)) as served:
            acp = AcpHttpClient(served)
            await acp.initialize()
            session_id = await acp.new_session()
            body = json.dumps(acp.prompt_message(session_id)).encode()
            headers = {"content-type": "application/json", HEADER: acp.connection or ""}
            async with served.client.stream("POST", "/acp", content=body, headers=headers) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                async for _ in httpx2.EventSource(response):
                    break  # one update seen: the turn is running; now leave
                running = served.bridge.get(session_id).running
                assert running is not None
            with anyio.fail_after(5):
                assert await running.result() == "cancelled"
                await model.wait_for_disconnects(1)  # the model request was closed
            _, messages = await acp.stream(acp.prompt_message(session_id, "again"))  # limit 1: the slot is back
            assert messages[-1]["result"] == {"stopReason": "end_turn"}


async def test_missing_or_unknown_connection_is_400_with_the_id_kept() -> None:
    async with running_daemon(None) as served:
        acp = AcpHttpClient(served)
        missing = await acp.post(acp.message("session/new", {"cwd": "/tmp", "mcpServers": []}))
        assert missing.status_code == 400
        assert (missing.json()["id"], missing.json()["error"]["code"]) == (1, -32600)
        acp.connection = "nope"
        unknown = await acp.post(acp.message("session/new", {"cwd": "/tmp", "mcpServers": []}))
        assert unknown.status_code == 400 and unknown.json()["id"] == 2


async def test_delete_ends_the_connection_and_cancels_its_prompts() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="long " * 500))
        async with running_daemon(model) as served:
            acp = AcpHttpClient(served)
            await acp.initialize()
            session_id = await acp.new_session()
            outcome: dict[str, Any] = {}

            async def prompt() -> None:
                outcome["result"] = await acp.stream(acp.prompt_message(session_id))

            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt)
                await model.wait_for_requests(1)
                deleted = await served.client.delete("/acp", headers={HEADER: acp.connection or ""})
                assert deleted.status_code == 204
            assert outcome["result"][1][-1]["result"] == {"stopReason": "cancelled"}
            after = await acp.post(acp.message("session/new", {"cwd": "/tmp", "mcpServers": []}))
            assert after.status_code == 400


async def test_the_stdio_hostile_corpus_gives_the_same_errors_over_http() -> None:
    async with running_daemon(None) as served:
        acp = AcpHttpClient(served)
        await acp.initialize()
        session_id = await acp.new_session()
        failures: list[str] = []
        for name, line, code, reply_id in CASES:
            if name == "oversized line":
                continue  # the daemon's body cap (413) applies before JSON-RPC
            response = await acp.post(line.replace(SID.encode(), session_id.encode()))
            if code is None:
                if response.status_code != 202:
                    failures.append(f"{name}: expected 202, got {response.status_code} {response.text}")
                continue
            body = response.json()
            got = (body.get("error") or {}).get("code"), body.get("id")
            if got != (code, reply_id):
                failures.append(f"{name}: expected {(code, reply_id)}, got {got} ({response.status_code})")
        assert not failures, "\n".join(failures)
