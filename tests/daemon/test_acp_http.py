"""``/acp`` over raw HTTP (Streamable HTTP, ACP RFD): every status of the transport, stream routing, the shared queue,
DELETE, slow readers, unread streams, the hostile corpus, and the guards (token, Host, Origin, CORS) on every method."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest

from acp_server.config import Settings
from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip

from ..e2e.test_hostile_input import CASES, SID
from ._support import Served, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CONN = "Acp-Connection-Id"
SESS = "Acp-Session-Id"
JSON = {"content-type": "application/json"}
SSE = {"accept": "text/event-stream"}


class Stream:
    """One open GET stream: its JSON-RPC messages one by one."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self._events = httpx2.EventSource(response).__aiter__()

    async def next(self, timeout: float = 5.0) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            sse = await self._events.__anext__()
        message: dict[str, Any] = json.loads(sse.data)
        return message

    async def until_response(self, msg_id: Any, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Every message up to and including the response to ``msg_id``."""
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(timeout):
            while True:
                seen.append(await self.next(timeout))
                if "method" not in seen[-1] and seen[-1].get("id") == msg_id:
                    return seen

    async def ended(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(timeout):
            while True:
                try:
                    seen.append(await self.next(timeout))
                except StopAsyncIteration:
                    return seen


class RawAcp:
    """A hand-written Streamable HTTP client (no SDK): POSTs and GET streams."""

    def __init__(self, served: Served) -> None:
        self.client = served.client
        self.connection: str | None = None
        self._id = 0

    def message(self, method: str, params: Any) -> dict[str, Any]:
        self._id += 1
        return {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}

    def prompt_message(self, session_id: str, text: str = "hi") -> dict[str, Any]:
        return self.message("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})

    async def post(
        self, message: dict[str, Any] | bytes, session: str | None = None, headers: dict[str, str] | None = None
    ) -> httpx2.Response:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        sent = {**JSON, **({CONN: self.connection} if self.connection else {}), **({SESS: session} if session else {})}
        return await self.client.post("/acp", content=body, headers={**sent, **(headers or {})})

    async def initialize(self) -> dict[str, Any]:
        response = await self.post(self.message("initialize", {"protocolVersion": 1}))
        assert response.status_code == 200, response.text
        self.connection = response.headers[CONN]
        body: dict[str, Any] = response.json()
        assert body["result"]["connectionId"] == self.connection
        return body["result"]  # type: ignore[no-any-return]

    @asynccontextmanager
    async def stream(self, session: str | None = None) -> AsyncIterator[Stream]:
        headers = {**SSE, CONN: self.connection or "", **({SESS: session} if session else {})}
        async with self.client.stream("GET", "/acp", headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            yield Stream(response)

    async def new_session(self, connection_stream: Stream) -> str:
        message = self.message("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert (await self.post(message)).status_code == 202
        (answer,) = await connection_stream.until_response(message["id"])
        session_id = str(answer["result"]["sessionId"])
        commands = await connection_stream.next()  # right after the answer, on the same stream
        assert commands["method"] == "session/update" and commands["params"]["sessionId"] == session_id
        assert commands["params"]["update"]["sessionUpdate"] == "available_commands_update"
        return session_id


def _chunks(messages: list[dict[str, Any]]) -> str:
    return "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_post_202_and_the_answers_on_their_streams_response_last() -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="streamed over http", reasoning="hmm"))
        async with running_daemon(model) as served:
            acp = RawAcp(served)
            assert (await acp.initialize())["protocolVersion"] == 1
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                async with acp.stream(session_id) as session_stream:
                    prompt = acp.prompt_message(session_id)
                    response = await acp.post(prompt, session_id)
                    assert (response.status_code, response.content) == (202, b"")
                    *updates, last = await session_stream.until_response(prompt["id"])
    assert last["result"]["stopReason"] == "end_turn"
    assert all(m["method"] == "session/update" and m["params"]["sessionId"] == session_id for m in updates)
    assert _chunks(updates) == "streamed over http"


async def test_a_prompt_posted_before_its_stream_opens_waits_for_it() -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="waited for you"))
        async with running_daemon(model) as served:
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                prompt = acp.prompt_message(session_id)
                assert (await acp.post(prompt, session_id)).status_code == 202
                await model.wait_for_requests(1)
                async with acp.stream(session_id) as session_stream:
                    messages = await session_stream.until_response(prompt["id"])
    assert messages[-1]["result"]["stopReason"] == "end_turn"
    assert _chunks(messages) == "waited for you"


async def test_an_unread_stream_drops_the_connection_after_its_bound_and_cancels_the_prompt() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="long " * 500))
        async with running_daemon(model) as served:
            served.acp.stream_timeout_s = 0.5
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                assert (await acp.post(acp.prompt_message(session_id), session_id)).status_code == 202
                await model.wait_for_requests(1)
                running = served.bridge.get(session_id).running
                assert running is not None
                # the session stream is never opened: the connection is dropped, its prompt cancelled
                with anyio.fail_after(5):
                    assert await running.result() == "cancelled"
                assert await conn_stream.ended() == []
            after = await acp.post(acp.message("session/list", {}))
            assert after.status_code == 404


async def test_seven_concurrent_prompts_five_run_two_refused_on_the_stream_one_counter_with_rest() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="slow " * 30))
        async with running_daemon(model) as served:
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                async with acp.stream(session_id) as session_stream:
                    prompts = [acp.prompt_message(session_id, f"p{i}") for i in range(7)]
                    async with anyio.create_task_group() as tg:
                        for prompt in prompts:
                            tg.start_soon(acp.post, prompt, session_id)
                    answers: dict[Any, dict[str, Any]] = {}
                    refusals: list[dict[str, Any]] = []
                    with anyio.fail_after(10):
                        while len(refusals) < 2:
                            message = await session_stream.next()
                            if "error" in message:
                                refusals.append(message)
                        rest = await served.prompt(session_id)  # REST sees the same full counter
                        assert rest.status_code == 503
                        assert rest.json()["pendingCount"] == 5
                        while len(answers) < 5:
                            message = await session_stream.next()
                            if "result" in message:
                                answers[message["id"]] = message
    for refusal in refusals:
        assert refusal["error"]["code"] == -32603
        assert refusal["error"]["data"] == {
            "errorKind": "prompt_queue_full",
            "sessionId": session_id,
            "limit": 5,
            "pendingCount": 5,
            "retryable": True,
        }
    assert {m["result"]["stopReason"] for m in answers.values()} == {"end_turn"}
    assert set(answers) | {r["id"] for r in refusals} == {p["id"] for p in prompts}


async def test_delete_ends_the_connection_cancels_its_prompts_and_ends_its_streams() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="long " * 500))
        async with running_daemon(model) as served:
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                async with acp.stream(session_id) as session_stream:
                    prompt = acp.prompt_message(session_id)
                    await acp.post(prompt, session_id)
                    await model.wait_for_requests(1)
                    deleted = await served.client.delete("/acp", headers={CONN: acp.connection or ""})
                    assert deleted.status_code == 202
                    messages = await session_stream.ended()
                    assert messages[-1] == {"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "cancelled"}}
                assert await conn_stream.ended() == []
            assert (await acp.post(acp.message("session/list", {}))).status_code == 404


async def test_a_slow_reader_gets_backpressure_never_a_dropped_update() -> None:
    text = "".join(f"w{i} " for i in range(300))
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.001, text=text))
        async with running_daemon(model, settings=Settings()) as served:
            served.acp.capacity = 3
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                async with acp.stream(session_id) as session_stream:
                    prompt = acp.prompt_message(session_id)
                    await acp.post(prompt, session_id)
                    messages: list[dict[str, Any]] = []
                    with anyio.fail_after(20):
                        while not messages or messages[-1].get("id") != prompt["id"]:
                            messages.append(await session_stream.next())
                            await anyio.lowlevel.checkpoint()
    assert messages[-1]["result"]["stopReason"] == "end_turn"
    assert _chunks(messages) == text


async def test_rest_prompts_count_against_acp_prompts() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="slow " * 30))
        async with running_daemon(model) as served:
            acp = RawAcp(served)
            await acp.initialize()
            async with acp.stream() as conn_stream:
                session_id = await acp.new_session(conn_stream)
                for _ in range(5):
                    assert (await served.prompt(session_id)).status_code == 202
                async with acp.stream(session_id) as session_stream:
                    prompt = acp.prompt_message(session_id)
                    assert (await acp.post(prompt, session_id)).status_code == 202
                    (refusal,) = await session_stream.until_response(prompt["id"])
                assert refusal["error"]["data"]["pendingCount"] == 5
                await served.client.post(f"/session/{session_id}/cancel")


async def _statuses(served: Served) -> list[tuple[str, int, int]]:
    """(case, expected, got) for every refusal and acceptance of the transport."""
    acp = RawAcp(served)
    client = served.client
    init = json.dumps(acp.message("initialize", {"protocolVersion": 1})).encode()
    got: list[tuple[str, int, int]] = []

    def check(name: str, expected: int, response: httpx2.Response) -> None:
        got.append((name, expected, response.status_code))

    check("POST text/plain", 415, await client.post("/acp", content=init, headers={"content-type": "text/plain"}))
    check("POST no content type", 415, await client.post("/acp", content=init))
    check("POST batch", 501, await acp.post(b"[" + init + b"]"))
    check("POST not json", 400, await acp.post(b"hello"))
    check("POST missing connection", 400, await acp.post(acp.message("session/list", {})))
    acp.connection = "nope"
    check("POST unknown connection", 404, await acp.post(acp.message("session/list", {})))
    acp.connection = None
    check("POST initialize", 200, await acp.post(init))
    await acp.initialize()
    conn = acp.connection or ""
    check("GET no accept", 406, await client.get("/acp", headers={CONN: conn}))
    check("GET accept json", 406, await client.get("/acp", headers={CONN: conn, "accept": "application/json"}))
    check("GET missing connection", 400, await client.get("/acp", headers=SSE))
    check("GET unknown connection", 404, await client.get("/acp", headers={**SSE, CONN: "nope"}))
    check("GET unknown session", 404, await client.get("/acp", headers={**SSE, CONN: conn, SESS: "nope"}))
    check("POST list", 202, await acp.post(acp.message("session/list", {})))
    check("POST notification", 202, await acp.post({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {}}))
    check("POST a client response", 202, await acp.post({"jsonrpc": "2.0", "id": 99, "result": {}}))
    prompt = acp.prompt_message("s1")
    check("POST prompt without session header", 400, await acp.post(prompt))
    check("POST prompt, unknown session", 404, await acp.post(prompt, "s1"))
    check("POST prompt, other session header", 400, await acp.post(prompt, "s2"))
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    check("POST cancel without session header", 400, await acp.post(cancel))
    check("POST list, unknown session header", 404, await acp.post(acp.message("session/list", {}), "nope"))
    check("DELETE missing connection", 400, await client.delete("/acp"))
    check("DELETE unknown connection", 404, await client.delete("/acp", headers={CONN: "nope"}))
    check("DELETE", 202, await client.delete("/acp", headers={CONN: conn}))
    check("DELETE again", 404, await client.delete("/acp", headers={CONN: conn}))
    check("PUT", 405, await client.put("/acp", content=init, headers=JSON))
    return got


async def test_every_status_of_the_transport() -> None:
    async with running_daemon(None) as served:
        got = await _statuses(served)
    wrong = [f"{name}: expected {expected}, got {status}" for name, expected, status in got if expected != status]
    assert not wrong, "\n".join(wrong)


async def test_refusal_bodies_are_json_rpc_errors_with_the_id_kept() -> None:
    async with running_daemon(None) as served:
        acp = RawAcp(served)
        missing = await acp.post(acp.message("session/list", {}))
        assert missing.status_code == 400
        assert (missing.json()["id"], missing.json()["error"]["code"]) == (1, -32600)
        acp.connection = "nope"
        unknown = await acp.post(acp.message("session/list", {}))
        assert unknown.status_code == 404 and unknown.json()["id"] == 2
        bad = await acp.post(acp.message("initialize", {}))  # no connection header: a failed initialize opens none
        acp.connection = None
        bad = await acp.post(acp.message("initialize", {}))
        assert bad.status_code == 400 and CONN not in bad.headers
        assert bad.json()["error"]["code"] == -32602


async def test_the_stdio_hostile_corpus_gives_the_same_errors_over_http() -> None:
    async with running_daemon(None) as served:
        acp = RawAcp(served)
        await acp.initialize()
        failures: list[str] = []
        async with acp.stream() as conn_stream:
            session_id = await acp.new_session(conn_stream)
            async with acp.stream(session_id) as session_stream:
                for name, line, code, reply_id in CASES:
                    if name == "oversized line":
                        continue  # the daemon's body cap (413) applies before JSON-RPC
                    body = line.replace(SID.encode(), session_id.encode())
                    try:
                        parsed = json.loads(body)
                    except (ValueError, RecursionError):
                        parsed = None
                    params = parsed.get("params") if isinstance(parsed, dict) else None
                    named = params.get("sessionId") if isinstance(params, dict) else None
                    if isinstance(named, str) and not named.isascii():
                        # no header can carry it: refused at the door
                        response = await acp.post(body)
                        if response.status_code != 400:
                            failures.append(f"{name}: expected 400, got {response.status_code}")
                        continue
                    response = await acp.post(body, named if isinstance(named, str) else None)
                    if isinstance(parsed, list):
                        if response.status_code != 501:
                            failures.append(f"{name}: expected 501, got {response.status_code}")
                        continue
                    if response.status_code == 400:
                        answer = response.json()
                    elif response.status_code == 404 and named not in (None, session_id):
                        continue  # a session unknown to the connection is refused at the door
                    elif response.status_code == 202:
                        if code is None:
                            continue
                        stream = session_stream if named == session_id else conn_stream
                        answer = await stream.next()
                    else:
                        failures.append(f"{name}: unexpected {response.status_code} {response.text}")
                        continue
                    got = (answer.get("error") or {}).get("code"), answer.get("id")
                    if got != (code, reply_id):
                        failures.append(f"{name}: expected {(code, reply_id)}, got {got} ({response.status_code})")
        assert not failures, "\n".join(failures)


async def test_token_host_and_origin_guard_every_method_and_the_upgrade() -> None:
    async with running_daemon(None, token="s3cret", allow_origins=("http://ok.example",)) as served:
        async with httpx2.AsyncClient(base_url=served.url, timeout=5) as bare:
            for method in ("GET", "POST", "DELETE"):
                assert (await bare.request(method, "/acp", headers=SSE)).status_code == 401, method
            upgrade = {
                "connection": "Upgrade",
                "upgrade": "websocket",
                "sec-websocket-version": "13",
                "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
            }
            denied = await bare.get("/acp", headers=upgrade)
            assert denied.status_code == 401
            assert denied.json()["code"] == "unauthorized"
            evil = await served.client.get("/acp", headers={**upgrade, "origin": "http://evil.example"})
            assert evil.status_code == 403
        preflight = await served.client.options(
            "/acp",
            headers={
                "origin": "http://ok.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, acp-connection-id, acp-session-id",
            },
        )
        assert preflight.status_code == 200, preflight.text
        allowed = preflight.headers["access-control-allow-headers"].lower()
        assert "acp-connection-id" in allowed and "acp-session-id" in allowed
        acp = RawAcp(served)
        init = await served.client.post(
            "/acp",
            json=acp.message("initialize", {"protocolVersion": 1}),
            headers={"origin": "http://ok.example"},
        )
        assert init.status_code == 200
        assert "acp-connection-id" in init.headers["access-control-expose-headers"].lower()


async def test_tokenless_daemon_refuses_a_foreign_host_on_the_upgrade() -> None:
    async with running_daemon(None) as served:
        upgrade = {
            "connection": "Upgrade",
            "upgrade": "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
            "host": "evil.example",
        }
        assert (await served.client.get("/acp", headers=upgrade)).status_code == 403
