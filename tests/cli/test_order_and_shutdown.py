"""The stdio face in process (real dispatcher, real bridge, a scripted turn) with a client that reads late:
order across prompts and requests holds, every request read is answered once, and input that ends while the client
does not read ends the connection within the grace."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.cli import _stdio
from acp_server.cli._stdio import serve_connection
from acp_server.config import Settings
from acp_server.domain import Emit, Prompt, StopReason, TextChunk

pytestmark = pytest.mark.anyio

BIG = "a" * 16_384  # 300 of these are over the outbox's 1 MiB high-water mark


async def scripted(session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
    """``big:N`` streams N large chunks; ``hang`` waits until cancelled; anything else streams three small ones."""
    text = prompt.title
    if text.startswith("big:"):
        for _ in range(int(text[4:])):
            await emit(TextChunk(BIG))
    elif text == "hang":
        await anyio.sleep_forever()
    else:
        for i in range(3):
            await emit(TextChunk(f"{text}-{i}"))
    return "end_turn"


def request(msg_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode() + b"\n"


def prompt(msg_id: int, session_id: str, text: str) -> bytes:
    return request(msg_id, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})


class Client:
    """Both pipes of a client: lines it writes (``write``), an ``eof()``, and a stdout it reads only when told."""

    def __init__(self) -> None:
        self._lines_in, self._lines_out = anyio.create_memory_object_stream[bytes](100)
        self.read_count = 0  # lines the agent has taken from its stdin
        self.reading = anyio.Event()  # set: the client reads its stdout
        self.stalled = anyio.Event()  # the agent is blocked writing to it
        self.out = bytearray()
        self.changed = anyio.Event()

    async def write(self, line: bytes) -> None:
        await self._lines_in.send(line)

    def eof(self) -> None:
        self._lines_in.close()

    def close(self) -> None:
        self._lines_in.close()
        self._lines_out.close()

    async def receive(self) -> bytes:
        try:
            line = await self._lines_out.receive()
        except anyio.EndOfStream:
            return b""
        self.read_count += 1
        return line

    async def send(self, data: bytes) -> None:
        if not self.reading.is_set():
            self.stalled.set()
            await self.reading.wait()
        self.out += data
        self.changed.set()
        self.changed = anyio.Event()

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in bytes(self.out).splitlines()]

    async def until(self, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        with anyio.fail_after(10):
            while not done(self.messages()):
                await self.changed.wait()
        return self.messages()


def answered(*ids: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda messages: set(ids) <= {m.get("id") for m in messages if "method" not in m}


async def open_session(client: Client) -> str:
    await client.write(request(1, "initialize", {"protocolVersion": 1}))
    await client.write(request(2, "session/new", {"cwd": "/w", "mcpServers": []}))
    messages = await client.until(answered(1, 2))
    return str(next(m for m in messages if m.get("id") == 2)["result"]["sessionId"])


def texts_until(messages: list[dict[str, Any]], msg_id: int) -> list[str]:
    """The update texts before the answer to ``msg_id``."""
    out: list[str] = []
    for message in messages:
        if message.get("id") == msg_id and "method" not in message:
            return out
        if message.get("method") == "session/update" and "content" in message["params"]["update"]:
            out.append(message["params"]["update"]["content"]["text"])  # not session_info_update (the title)
    raise AssertionError(f"no answer to {msg_id}")


async def serving(client: Client, stop: anyio.Event, tg: Any, bridge: SessionBridge) -> None:
    try:
        await serve_connection(bridge, client.receive, client.send, Settings(), tg, stop)
    finally:
        client.close()


async def test_the_next_prompt_s_updates_never_overtake_the_previous_prompt_s_answer() -> None:
    client, stop = Client(), anyio.Event()
    client.reading.set()
    async with SessionBridge(scripted) as bridge, anyio.create_task_group() as tg:
        tg.start_soon(serving, client, stop, tg, bridge)
        session_id = await open_session(client)
        client.reading = anyio.Event()  # the client stops reading
        await client.write(prompt(3, session_id, "big:300"))
        await client.write(prompt(4, session_id, "second"))
        await client.stalled.wait()
        await anyio.sleep(0.2)  # the second prompt is queued behind a prompt whose reader is stuck
        client.reading.set()
        messages = await client.until(answered(3, 4))
        stop.set()
    before_first_answer = texts_until(messages, 3)
    assert before_first_answer == [BIG] * 300
    assert texts_until(messages, 4)[300:] == ["second-0", "second-1", "second-2"]


async def test_session_close_is_answered_after_the_prompt_it_ended() -> None:
    client, stop = Client(), anyio.Event()
    client.reading.set()
    async with SessionBridge(scripted) as bridge, anyio.create_task_group() as tg:
        tg.start_soon(serving, client, stop, tg, bridge)
        session_id = await open_session(client)
        client.reading = anyio.Event()
        await client.write(prompt(3, session_id, "big:400"))
        await client.stalled.wait()
        await client.write(request(4, "session/close", {"sessionId": session_id}))
        await anyio.sleep(0.2)
        client.reading.set()
        messages = await client.until(answered(3, 4))
        stop.set()
    replies = [m["id"] for m in messages if "method" not in m and m.get("id") in (3, 4)]
    assert replies == [3, 4]
    updates_after_close = messages[[m.get("id") for m in messages].index(4) :]
    assert not any(m.get("method") == "session/update" for m in updates_after_close)


async def test_input_that_ends_while_the_client_does_not_read_ends_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stdio, "SHUTDOWN_GRACE_S", 0.2)
    client, stop = Client(), anyio.Event()
    client.reading.set()
    async with SessionBridge(scripted) as bridge, anyio.create_task_group() as tg:
        tg.start_soon(serving, client, stop, tg, bridge)
        session_id = await open_session(client)
        client.reading = anyio.Event()  # and it never reads again
        await client.write(prompt(3, session_id, "big:400"))
        await client.stalled.wait()
        await client.write(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {}}).encode() + b"\n")
        client.eof()
        with anyio.fail_after(5):
            await stop.wait()  # EOF was seen although a line waits for a client that does not read
        tg.cancel_scope.deadline = anyio.current_time() + 5  # serve_connection returns within its graces
    assert not tg.cancel_scope.cancelled_caught


async def test_every_request_read_after_a_stop_is_answered_once() -> None:
    client, stop = Client(), anyio.Event()
    client.reading.set()
    async with SessionBridge(scripted) as bridge, anyio.create_task_group() as tg:
        tg.start_soon(serving, client, stop, tg, bridge)
        session_id = await open_session(client)
        await client.write(prompt(3, session_id, "hang"))
        await anyio.wait_all_tasks_blocked()
        stop.set()  # SIGTERM
        second = (await client.until(answered(2)))  # still served: the connection is shutting down
        await client.write(prompt(4, session_id, "late"))
        await client.write(request(5, "session/list", {}))
    assert second
    read = client.read_count - 2  # initialize and session/new aside
    replies = [m for m in client.messages() if "method" not in m and m.get("id") in (3, 4, 5)]
    assert sorted(r["id"] for r in replies) == list(range(3, 3 + read))  # each request read: exactly one answer
    assert next(r for r in replies if r["id"] == 3)["result"] == {"stopReason": "cancelled"}
