"""Slow readers of the HTTP faces (a real uvicorn on 127.0.0.1, the loopback model, real sockets):

- REST SSE: a subscriber that stops reading is dropped once it lags; it then gets every event (replayed from the ring
  on reconnect with ``Last-Event-ID``) or an explicit ``resync_required`` — never a silent gap;
- ``/acp``: a ``session/prompt`` whose session-stream reader pauses gets every update and then the response; nothing
  is dropped because the stream's channel holds the turn back (the prompt's event stream fills up and the turn
  waits).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

from acp_server.bridge import DEFAULT_STREAM_CAPACITY, PromptHandle
from acp_server.daemon import Accepted
from acp_server.domain import Prompt
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.provider.offline._exchange import Exchange

from ._support import Event, EventReader, Served, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CHUNK_BYTES = 16 * 1024


def words(count: int) -> list[str]:
    """An answer of ``count`` chunks (the model streams it word by word, each with its leading space)."""
    return [("" if i == 0 else " ") + f"w{i:05d}".ljust(CHUNK_BYTES - 1, "x") for i in range(count)]


def count_model_chunks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-element list holding how many chunks the model has written so far."""
    sent = [0]
    original = Exchange.send_chunk

    async def counting(self: Exchange, **kwargs: Any) -> None:
        await original(self, **kwargs)
        sent[0] += 1

    monkeypatch.setattr(Exchange, "send_chunk", counting)
    return sent


def assert_contiguous(events: list[Event], first: int) -> None:
    assert [e.id for e in events] == list(range(first, first + len(events))), "a gap in the event ids"


async def until_ended_or_reset(reader: EventReader) -> list[Event]:
    """Every event until the server ends the stream, or resets the connection of a subscriber it dropped."""
    seen: list[Event] = []
    with anyio.fail_after(10):
        try:
            while True:
                seen.append(await reader.next(timeout=10))
        except (StopAsyncIteration, httpx2.ReadError, httpx2.RemoteProtocolError):
            return seen


def chunk_text(event: Event) -> str:
    assert event.event == "session_update"
    update = event.data["update"]
    assert update["sessionUpdate"] == "agent_message_chunk"
    text: str = update["content"]["text"]
    return text


# -- REST SSE ---------------------------------------------------------------------------------------------------

SSE_CHUNKS = 800  # 12.5 MiB: far more than the sockets between the daemon and the paused subscriber hold


@pytest.mark.parametrize("ring_size", [4096, 8], ids=["replayed", "resync"])
async def test_a_lagging_sse_subscriber_gets_every_event_or_an_explicit_resync(
    monkeypatch: pytest.MonkeyPatch, ring_size: int
) -> None:
    expected = words(SSE_CHUNKS)
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="".join(expected), reasoning=""))
        async with running_daemon(model, subscriber_queue_size=4, event_ring_size=ring_size) as served:
            daemon = served.daemon
            subscriptions: list[Any] = []
            accepted: list[Accepted] = []
            subscribe, submit = daemon.subscribe, daemon.submit_prompt

            def capture_subscription(session_id: str, last_event_id: int | None = None) -> Any:
                subscriptions.append(subscribe(session_id, last_event_id))
                return subscriptions[-1]

            def capture_prompt(session_id: str, prompt: Prompt, *, deadline_ms: int | None = None) -> Accepted:
                accepted.append(submit(session_id, prompt, deadline_ms=deadline_ms))
                return accepted[-1]

            monkeypatch.setattr(daemon, "subscribe", capture_subscription)
            monkeypatch.setattr(daemon, "submit_prompt", capture_prompt)
            session_id = await served.new_session()
            log = daemon.event_log(session_id)

            async with served.events(session_id) as reader:
                response = await served.prompt(session_id, "go")
                assert response.status_code == 202
                [subscription] = subscriptions
                with anyio.fail_after(10):
                    await subscription.dropped_event.wait()  # the reader stopped reading: it lagged and was dropped
                    assert await accepted[0].handle.result() == "end_turn"
                await anyio.wait_all_tasks_blocked()  # the pump has published the rest
                last_id = log.last_id
                assert last_id == accepted[0].event_id + SSE_CHUNKS + 2  # the chunks, the usage, the end
                # resumed: what reached the client before the drop, then the end (or the reset) of the stream
                before = await until_ended_or_reset(reader)
            first_id = accepted[0].event_id  # the session's first event is this prompt's prompt_accepted
            assert_contiguous(before, first_id)
            assert not before or before[0].event == "prompt_accepted"
            assert not before or before[-1].id < last_id  # the drop ended the stream early, visibly

            resume_from = before[-1].id if before else 0  # 0: every event of this attachment
            async with served.events(session_id, last_event_id=resume_from) as reader:
                if ring_size >= last_id - first_id + 1:
                    rest = await reader.until(lambda e: e.event == "turn_complete", timeout=10)
                    seen = before + rest
                    assert_contiguous(seen, first_id)  # every event, in order
                    assert [chunk_text(e) for e in seen[1:-2]] == expected
                    assert seen[-2].data["update"]["sessionUpdate"] == "usage_update"
                    assert seen[-1].data["stopReason"] == "end_turn"
                    return
                resync = await reader.next()
            # too far behind for the ring: told so explicitly, with what it missed
            assert resync.event == "resync_required"
            assert resync.id == last_id
            assert resync.data == {
                "sessionId": session_id,
                "lastEventId": resume_from,
                "oldestEventId": last_id - ring_size + 1,
                "latestEventId": last_id,
            }
            async with served.events(session_id, last_event_id=resync.data["oldestEventId"] - 1) as reader:
                tail = await reader.until(lambda e: e.event == "turn_complete", timeout=10)
            assert_contiguous(tail, last_id - ring_size + 1)
            assert [chunk_text(e) for e in tail[:-2]] == expected[-(ring_size - 2) :]  # then the usage, the end


# -- /acp -------------------------------------------------------------------------------------------------------

ACP_CHUNKS = 1600  # 25 MiB: more than the sockets, the exchange and the prompt's stream hold together
HEADER = "Acp-Connection-Id"


async def acp_post(
    served: Served, connection: str | None, message: dict[str, Any], session: str | None = None
) -> httpx2.Response:
    headers = {"content-type": "application/json", **({HEADER: connection} if connection else {})}
    if session is not None:
        headers["Acp-Session-Id"] = session
    return await served.client.post("/acp", content=json.dumps(message).encode(), headers=headers)


async def test_a_paused_acp_reader_gets_every_update_then_the_response(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = words(ACP_CHUNKS)
    sent = count_model_chunks(monkeypatch)
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="".join(expected), reasoning=""))
        async with running_daemon(model) as served:
            handles: list[PromptHandle] = []
            send_prompt = served.bridge.send_prompt

            def capture(
                session_id: str,
                prompt: Prompt,
                *,
                deadline_ms: int | None = None,
                client: Any = None,
                origin: Any = None,
            ) -> PromptHandle:
                handles.append(send_prompt(session_id, prompt, deadline_ms=deadline_ms, client=client, origin=origin))
                return handles[-1]

            monkeypatch.setattr(served.bridge, "send_prompt", capture)
            init = await acp_post(
                served, None, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
            )
            connection = init.headers[HEADER]
            sse = {"accept": "text/event-stream", HEADER: connection}
            async with served.client.stream("GET", "/acp", headers=sse) as connection_stream:
                new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
                assert (await acp_post(served, connection, new)).status_code == 202
                answer = await httpx2.EventSource(connection_stream).__aiter__().__anext__()
                session_id = json.loads(answer.data)["result"]["sessionId"]
            prompt = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
            }
            headers = {**sse, "Acp-Session-Id": session_id}
            async with served.client.stream("GET", "/acp", headers=headers) as response:
                assert (await acp_post(served, connection, prompt, session_id)).status_code == 202
                assert response.headers["content-type"].startswith("text/event-stream")
                [handle] = handles
                events = httpx2.EventSource(response).__aiter__()
                first = json.loads((await events.__anext__()).data)
                messages: list[dict[str, Any]] = [first]

                # The reader is away: poll (bounded) until the model is held back too, checking the turn's stream.
                last, still = -1, 0
                with anyio.fail_after(10):
                    while still < 10:
                        await anyio.sleep(0.02)
                        assert handle.events.buffered <= DEFAULT_STREAM_CAPACITY  # never over its capacity
                        still = still + 1 if sent[0] == last else 0
                        last = sent[0]
                assert handle.events.buffered == DEFAULT_STREAM_CAPACITY  # full: the exchange stopped taking events
                assert not handle.done  # the turn waits for the reader
                assert sent[0] < ACP_CHUNKS  # and so does the model

                with anyio.fail_after(20):
                    async for sse in events:
                        messages.append(json.loads(sse.data))
                        if "method" not in messages[-1]:
                            break  # the response: the last message of this prompt
    *updates, final = messages
    assert (final["id"], final["result"]["stopReason"]) == (3, "end_turn")  # + _meta.acpServer.usage
    assert all(m["method"] == "session/update" and m["params"]["sessionId"] == session_id for m in updates)
    info, *updates = updates
    assert info["params"]["update"]["sessionUpdate"] == "session_info_update"  # the first prompt titles the session
    texts = [m["params"]["update"]["content"]["text"] for m in updates]
    assert len(texts) == ACP_CHUNKS
    assert texts == expected  # every update, in order
