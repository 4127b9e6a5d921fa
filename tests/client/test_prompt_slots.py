"""Local prompt reservations (Q11–Q13) against a real daemon: every release path gives the slot back, exactly once.

Each release-path test ends with ``assert_released_once`` (``_support.py``): ``limit`` new prompts are admitted
locally (the slot came back) and one more is refused locally with ``pending_count == limit`` and no request sent (it
came back once: a double release would have let ``limit + 1`` through).
"""

from __future__ import annotations

import math
import socket
from functools import partial
from typing import Any

import anyio
import httpx2
import pytest
from anyio.lowlevel import checkpoint

from acp_server.client import (
    DaemonClient,
    DaemonClientError,
    DaemonConnectError,
    DaemonEventStreamEndedError,
    DaemonPendingPromptLimitError,
    DaemonPromptQueueFullError,
    DaemonProtocolError,
    DaemonSessionNotFoundError,
    DaemonTurnError,
    PromptAcceptedEvent,
    SessionUpdateEvent,
    TurnCompleteEvent,
)
from acp_server.config import Settings
from acp_server.provider.offline import Answer, ChunksThenSilent, ErrorStatus, HangAfterHeaders, LoopbackModel

from ._support import Recorder, assert_released_once, running_daemon, wait_pending

pytestmark = pytest.mark.anyio


async def assert_client_released_once(
    client: DaemonClient, rec: Recorder, model: LoopbackModel, session_id: str
) -> None:
    await assert_released_once(
        partial(client.prompt, session_id), partial(client.pending_prompts, session_id), client.limit, rec, model
    )


def client_for(url: str, rec: Recorder, limit: Any = 1, **kwargs: Any) -> DaemonClient:
    return DaemonClient(url, max_pending_prompts_per_session=limit, transport=rec, **kwargs)


# -- local refusal --------------------------------------------------------------------------------------------


async def test_local_refusal_sends_nothing_and_the_daemon_sees_nothing() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec, limit=2) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(HangAfterHeaders())
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.prompt, session_id, "first")
                tg.start_soon(client.prompt, session_id, "second")
                async with client.events(session_id, 0) as events:  # the daemon accepted both
                    accepted = [e async for e in _take(events, PromptAcceptedEvent, 2)]
                assert [e.pending_count for e in accepted] == [1, 2]
                await model.wait_for_requests(1)  # the first runs
                requests, daemon_events = len(rec.requests), served.last_event_id(session_id)
                with pytest.raises(DaemonPendingPromptLimitError) as refused:
                    await client.prompt(session_id, "third")
                assert str(refused.value) == (
                    f'Local prompt limit reached for session "{session_id}" (2/2 pending); nothing was sent'
                )
                assert len(rec.requests) == requests  # no request left the client ...
                assert served.pending(session_id) == 2  # ... and the daemon admitted nothing more
                assert served.last_event_id(session_id) == daemon_events
                assert len(model.requests) == 1
                assert client.pending_prompts(session_id) == 2
                tg.cancel_scope.cancel()


async def _take(events: Any, kind: type, n: int) -> Any:
    seen = 0
    async for event in events:
        if isinstance(event, kind):
            yield event
            seen += 1
            if seen == n:
                return


@pytest.mark.parametrize("limit", [None, 0, math.inf, 0.0], ids=["None", "0", "inf", "0.0"])
async def test_a_disabled_local_limit_leaves_admission_to_the_daemon(limit: Any) -> None:
    settings = Settings(max_pending_prompts_per_session=None)  # the daemon is unlimited too
    async with LoopbackModel() as model, running_daemon(model, settings=settings) as served:
        rec = Recorder()
        async with client_for(served.url, rec, limit=limit) as client:
            assert client.limit is None
            session_id = await client.create_session("/tmp")
            model.enqueue(HangAfterHeaders())
            async with anyio.create_task_group() as tg:
                for i in range(8):  # more than the default 5
                    tg.start_soon(client.prompt, session_id, f"p{i}")
                await wait_pending(partial(client.pending_prompts, session_id), 8)
                async with client.events(session_id, 0) as events:
                    accepted = [e async for e in _take(events, PromptAcceptedEvent, 8)]
                assert [e.pending_count for e in accepted] == list(range(1, 9))
                assert served.pending(session_id) == 8
                tg.cancel_scope.cancel()
            assert client.pending_prompts(session_id) == 0


# -- release paths --------------------------------------------------------------------------------------------


async def test_released_on_the_blocking_200_completion() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            result = await client.prompt(session_id, "hello", wait=True)
            assert result.stop_reason == "end_turn"
            assert rec.count("GET", "/events") == 0  # one request, no event stream
            assert rec.requests[-1] == ("POST", f"/session/{session_id}/prompt")
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_on_turn_complete_seen_on_the_event_stream() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(Answer(text="streamed answer", reasoning=""))
            updates: list[SessionUpdateEvent] = []
            result = await client.prompt(session_id, "hello", on_update=updates.append)
            assert result.stop_reason == "end_turn"
            assert "".join(u.text or "" for u in updates if u.kind == "agent_message_chunk") == "streamed answer"
            assert {u.prompt_id for u in updates} == {result.prompt_id}
            assert rec.last_event_ids == [str(served.last_event_id(session_id) - len(updates) - 2)]
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_on_turn_error() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(ErrorStatus(400))
            with pytest.raises(DaemonTurnError) as failed:
                await client.prompt(session_id, "hello")
            error = failed.value
            assert (error.session_id, error.code, error.status_code, error.retryable) == (
                session_id,
                "model_http_error",
                None,
                False,
            )
            assert error.prompt_id is not None and error.data["retryable"] is False
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_on_a_failed_blocking_turn() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(HangAfterHeaders())
            with pytest.raises(DaemonTurnError) as failed:
                await client.prompt(session_id, "hello", wait=True, deadline_ms=50)
            assert (failed.value.code, failed.value.status_code, failed.value.prompt_id) == (
                "prompt_deadline_exceeded",
                504,
                None,
            )
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_on_caller_cancellation_which_cancels_the_running_prompt() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(ChunksThenSilent(1))
            running = anyio.Event()
            with anyio.move_on_after(10) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lambda: client.prompt(session_id, "hello", on_update=lambda _: running.set()))
                    await running.wait()  # its first update: it is the running prompt
                    tg.cancel_scope.cancel()
            assert not scope.cancelled_caught
            assert rec.count("POST", "/cancel") == 1  # posted, shielded from the caller's cancellation
            await model.wait_for_disconnects(1)  # the daemon cancelled the turn ...
            async with client.events(session_id, 0) as events:
                [ended] = [e async for e in _take(events, TurnCompleteEvent, 1)]
            assert ended.stop_reason == "cancelled"  # ... and answered it cancelled
            assert served.pending(session_id) == 0
            await assert_client_released_once(client, rec, model, session_id)


async def test_cancelling_a_waiting_prompt_cancels_exactly_it_not_the_running_one() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec, limit=2) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(ChunksThenSilent(1))
            running = anyio.Event()
            async with anyio.create_task_group() as outer:
                outer.start_soon(lambda: client.prompt(session_id, "first", on_update=lambda _: running.set()))
                await running.wait()
                async with client.events(session_id) as events, anyio.create_task_group() as tg:
                    tg.start_soon(client.prompt, session_id, "second")
                    [accepted] = [e async for e in _take(events, PromptAcceptedEvent, 1)]
                    assert accepted.pending_count == 2  # it waits behind the first
                    await wait_for_stream(rec, 2)  # and its own event stream is open
                    tg.cancel_scope.cancel()
                assert client.pending_prompts(session_id) == 1  # the second's slot came back
                assert rec.count("POST", f"/prompt/{accepted.prompt_id}/cancel") == 1, rec.requests  # exactly that one
                assert rec.count("POST", f"/session/{session_id}/cancel") == 0  # the session route would stop the first
                assert model.disconnects == []
                assert served.pending(session_id) == 1  # the daemon dropped it from its queue
                outer.cancel_scope.cancel()


async def wait_for_stream(rec: Recorder, n: int) -> None:
    with anyio.fail_after(5):
        while rec.count("GET", "/events") < n:
            await checkpoint()


async def test_released_on_caller_cancellation_of_a_blocking_prompt_which_the_daemon_cancels() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(HangAfterHeaders())
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.prompt(session_id, "hello", wait=True))
                await model.wait_for_requests(1)
                tg.cancel_scope.cancel()  # the connection closes: the daemon cancels exactly this prompt
            await model.wait_for_disconnects(1)
            assert rec.count("POST", "/cancel") == 0
            await assert_client_released_once(client, rec, model, session_id)


@pytest.mark.parametrize(
    ("reconnect", "error"),
    [("empty", DaemonEventStreamEndedError), ("refuse", DaemonConnectError)],
    ids=["ended-cleanly", "broken"],
)
async def test_released_when_the_event_stream_ends_before_the_turn(
    reconnect: Any, error: type[DaemonClientError]
) -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec, reconnect_delays=(0.0, 0.0)) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(HangAfterHeaders())
            rec.cut_events("prompt_accepted", reconnect=reconnect)
            with pytest.raises(error) as ended:
                await client.prompt(session_id, "hello")
            assert rec.count("GET", "/events") == 3  # the stream, then two reconnects
            assert ended.value.url == f"{served.url}/session/{session_id}/events"
            assert rec.count("POST", "/cancel") == 0  # not abandoned: its outcome is unknown, not unwanted
            rec.cut_events("\x00never", reconnect="forward")
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_when_the_request_fails_on_the_network() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            rec.fail("POST", "/prompt", httpx2.ConnectError("connection refused (injected)"))
            with pytest.raises(DaemonConnectError) as failed:
                await client.prompt(session_id, "hello")
            url = f"{served.url}/session/{session_id}/prompt"
            assert (failed.value.method, failed.value.url) == ("POST", url)
            assert isinstance(failed.value.__cause__, httpx2.ConnectError)
            assert str(failed.value) == f"POST {url}: cannot connect: connection refused (injected)"
            rec.clear_faults()
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_when_the_daemon_is_gone() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: it refuses, and no other socket can take the port
        port = sock.getsockname()[1]
        async with DaemonClient(f"http://127.0.0.1:{port}", max_pending_prompts_per_session=1) as client:
            for _ in range(3):  # each attempt reaches the network: the one slot keeps coming back
                with pytest.raises(DaemonConnectError):
                    await client.prompt("s1", "hello")
                assert client.pending_prompts("s1") == 0


@pytest.mark.parametrize(
    "body", [b"<html>502</html>", b'{"promptId": 7}', b"[]"], ids=["not-json", "bad-fields", "not-object"]
)
async def test_released_when_the_answer_cannot_be_parsed(body: bytes) -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            session_id = await client.create_session("/tmp")
            rec.corrupt("POST", "/prompt", body)
            with pytest.raises(DaemonProtocolError) as failed:
                await client.prompt(session_id, "hello")
            assert failed.value.status_code == 202
            rec.clear_faults()
            await assert_client_released_once(client, rec, model, session_id)


async def test_released_when_the_session_does_not_exist() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with client_for(served.url, rec) as client:
            with pytest.raises(DaemonSessionNotFoundError) as missing:
                await client.prompt(session_id="nope", prompt="hello")
            assert (missing.value.status_code, missing.value.session_id) == (404, "nope")
            assert client.pending_prompts("nope") == 0


# -- the daemon's refusal -------------------------------------------------------------------------------------


async def test_the_daemon_refuses_with_503_when_the_local_limit_is_looser() -> None:
    settings = Settings(max_pending_prompts_per_session=2)
    async with LoopbackModel() as model, running_daemon(model, settings=settings) as served:
        rec = Recorder()
        async with client_for(served.url, rec, limit=5) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(HangAfterHeaders())
            async with anyio.create_task_group() as tg, client.events(session_id) as events:
                tg.start_soon(client.prompt, session_id, "first")
                tg.start_soon(client.prompt, session_id, "second")
                _ = [e async for e in _take(events, PromptAcceptedEvent, 2)]
                with pytest.raises(DaemonPromptQueueFullError) as refused:
                    await client.prompt(session_id, "third")
                error = refused.value
                assert (error.session_id, error.limit, error.pending_count, error.retry_after) == (
                    session_id,
                    2,
                    2,
                    5.0,
                )
                assert (error.status_code, error.code) == (503, "prompt_queue_full")
                assert str(error) == f'Prompt queue full for session "{session_id}" (2/2 pending)'
                assert rec.count("POST", "/prompt") == 3  # it was sent: the daemon is the authority
                assert client.pending_prompts(session_id) == 2  # the refused one's slot came back, once
                tg.cancel_scope.cancel()
        assert served.pending(session_id) in (0, 1, 2)


async def test_from_capabilities_adopts_the_daemon_limit() -> None:
    for limit, expected in ((3, 3), (None, None)):
        settings = Settings(max_pending_prompts_per_session=limit)
        async with (
            running_daemon(None, settings=settings) as served,
            await DaemonClient.from_capabilities(served.url) as client,
        ):
            assert client.limit == expected
