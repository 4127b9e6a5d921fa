"""Leaving ``open_daemon`` (what SIGINT/SIGTERM do): turns cancelled and answered, streams ended, nothing leaks."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import httpx2
import pytest

from acp_server.bridge import BridgeClosedError
from acp_server.config import Settings
from acp_server.daemon import Daemon, DaemonOptions, open_daemon
from acp_server.domain import Prompt, TextPart
from acp_server.provider.offline import HangAfterHeaders, LoopbackModel

from ._support import TEXT, EventReader, serve_bridge

pytestmark = pytest.mark.anyio


async def test_shutdown_cancels_turns_answers_waiters_and_ends_streams() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        settings = Settings(base_url=model.base_url, model="m")
        results: dict[str, Any] = {}
        async with serve_bridge(settings) as bridge:
            async with (
                open_daemon(bridge, DaemonOptions(port=0)) as running,
                httpx2.AsyncClient(base_url=running.url, timeout=10) as client,
                anyio.create_task_group() as tg,
            ):
                    session_id = (await client.post("/session", json={"cwd": "/"})).json()["sessionId"]

                    async def wait_for_turn() -> None:
                        response = await client.post(
                            f"/session/{session_id}/prompt", params={"wait": "true"}, json={"prompt": TEXT}
                        )
                        results["wait"] = (response.status_code, response.json())

                    async with client.stream("GET", f"/session/{session_id}/events") as stream:
                        events = EventReader(stream)
                        tg.start_soon(wait_for_turn)
                        await model.wait_for_requests(1)
                        queued = await client.post(f"/session/{session_id}/prompt", json={"prompt": TEXT})
                        assert queued.status_code == 202
                        tg.start_soon(running.daemon.shutdown)  # what leaving the block does first
                        seen = await events.until_ended()
            assert results["wait"][0] == 200 and results["wait"][1]["stopReason"] == "cancelled"
            terminal = [e for e in seen if e.event in ("turn_complete", "turn_error")]
            assert [e.data["stopReason"] for e in terminal] == ["cancelled", "cancelled"]
            assert bridge.get(session_id).pending_prompt_count == 0
        await model.wait_for_disconnects(1)


async def test_a_closing_daemon_refuses_new_work_with_503() -> None:
    async with (
        LoopbackModel() as model,
        serve_bridge(Settings(base_url=model.base_url, model="m")) as bridge,
        Daemon(bridge, DaemonOptions(port=0)) as daemon,
    ):
            session_id = await daemon.create_session("/")
            await daemon.shutdown()
            with pytest.raises(BridgeClosedError):
                daemon.submit_prompt(session_id, Prompt((TextPart("x"),)))
            with pytest.raises(BridgeClosedError):
                daemon.subscribe(session_id)
            assert bridge.get(session_id).pending_prompt_count == 0


async def test_leaving_open_daemon_on_an_error_propagates_it_unwrapped() -> None:
    class Boom(Exception):
        pass

    async with serve_bridge(Settings()) as bridge:
        with pytest.raises(Boom):
            async with open_daemon(bridge, DaemonOptions(port=0)) as running:
                async with httpx2.AsyncClient(base_url=running.url) as client:
                    assert (await client.get("/health")).status_code == 200
                raise Boom


async def test_an_idle_stream_ends_at_shutdown_without_waiting_for_a_heartbeat() -> None:
    async with serve_bridge(Settings()) as bridge:
        with anyio.fail_after(5):
            async with (
                open_daemon(bridge, DaemonOptions(port=0, heartbeat_s=3600)) as running,
                httpx2.AsyncClient(base_url=running.url, timeout=10) as client,
                anyio.create_task_group() as tg,
            ):
                    session_id = (await client.post("/session", json={"cwd": "/"})).json()["sessionId"]
                    async with client.stream("GET", f"/session/{session_id}/events") as stream:
                        tg.start_soon(partial(running.daemon.shutdown))
                        assert await EventReader(stream).until_ended() == []
