"""Settings fan-out over a real daemon (127.0.0.1), with the official ACP SDK's remote clients (``acp.http``,
``acp.ws``) as two ``/acp`` connections on one session and a REST event stream beside them: every change of the
session's mode, model or title reaches every face and connection attached to it exactly once, in order, whichever
made it; setting the value it has announces nothing anywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from acp import connect_to_agent
from acp.http import create_http_stream
from acp.schema import ConfigOptionUpdate, CurrentModeUpdate, SessionInfoUpdate
from acp.ws import create_websocket_stream

from acp_server.config import Settings
from acp_server.provider.offline import Answer, LoopbackModel
from tests.acp_blocks import text_block

from ._support import EventReader, Served, running_daemon

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"
PICKABLE = Settings(models=("m", "big"))

Told = tuple[str, Any]


def told(update: Any) -> Told | None:
    """A settings update as (kind, what it says); None for any other update."""
    if isinstance(update, CurrentModeUpdate):
        return ("mode", update.current_mode_id)
    if isinstance(update, ConfigOptionUpdate):
        return ("options", {option.id: option.current_value for option in update.config_options})
    if isinstance(update, SessionInfoUpdate):
        return ("title", update.title)
    return None


class Watcher:
    """The client side of one SDK connection: the settings updates it was told, in the order they arrived."""

    def __init__(self) -> None:
        self.told: list[Told] = []
        self._arrived = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        settings = told(update)
        if settings is not None:
            self.told.append(settings)
            self._arrived.set()

    def on_connect(self, conn: Any) -> None:
        pass

    async def until(self, count: int, timeout: float = 5.0) -> list[Told]:
        """Every settings update so far, once there are at least ``count``."""
        with anyio.fail_after(timeout):
            while len(self.told) < count:
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return list(self.told)


@asynccontextmanager
async def sdk_connection(served: Served, kind: str, watcher: Watcher) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if kind == "http":
        transport = create_http_stream(f"{served.url}/acp", headers=headers)
    else:
        transport = await create_websocket_stream(f"ws{served.url.removeprefix('http')}/acp", headers=headers)
    conn = connect_to_agent(watcher, transport)
    try:
        with anyio.fail_after(10):
            await conn.initialize(protocol_version=1)
        yield conn
    finally:
        await conn.close()


async def rest_settings(events: EventReader) -> tuple[str, Any]:
    event = await events.next()
    if event.event == "mode_changed":
        return ("mode_changed", event.data["modeId"])
    assert event.event == "config_changed", event
    return ("config_changed", {option["id"]: option["currentValue"] for option in event.data["configOptions"]})


@pytest.mark.parametrize("kind", ["http", "ws"])
async def test_mode_and_model_changes_reach_every_connection_and_rest_once_and_a_repeat_nothing(kind: str) -> None:
    async with running_daemon(None, settings=PICKABLE, token=TOKEN) as served:
        mine, theirs = Watcher(), Watcher()
        async with sdk_connection(served, kind, mine) as a, sdk_connection(served, kind, theirs) as b:
            session_id = (await a.new_session(cwd="/tmp", mcp_servers=[])).session_id
            await b.resume_session(session_id=session_id, cwd="/tmp")
            async with served.events(session_id) as events:
                # A mode change on one /acp connection: the other one and REST hear it.
                await a.set_session_mode(session_id=session_id, mode_id="accept-edits")
                mode = [("mode", "accept-edits"), ("options", {"mode": "accept-edits", "model": "m"})]
                assert await theirs.until(2) == mode
                assert await rest_settings(events) == ("mode_changed", "accept-edits")
                assert await rest_settings(events) == ("config_changed", {"mode": "accept-edits", "model": "m"})

                # The same values again, from either face: nothing, anywhere (the next change shows what came).
                await a.set_session_mode(session_id=session_id, mode_id="accept-edits")
                await b.set_config_option(config_id="mode", session_id=session_id, value="accept-edits")
                await a.set_config_option(config_id="model", session_id=session_id, value="m")  # the default
                same = await served.client.post(f"/session/{session_id}/mode", json={"modeId": "accept-edits"})
                assert same.status_code == 200

                # A REST change reaches both /acp connections.
                picked = await served.client.post(
                    f"/session/{session_id}/config", json={"configId": "model", "value": "big"}
                )
                assert picked.status_code == 200
                model = [("options", {"mode": "accept-edits", "model": "big"})]
                assert await rest_settings(events) == ("config_changed", {"mode": "accept-edits", "model": "big"})
                assert await theirs.until(3) == mode + model
                assert await mine.until(3) == mode + model  # its own change once (with its answer), then REST's

                # The other connection's change reaches the first one, and REST, in order after the earlier ones.
                await b.set_session_mode(session_id=session_id, mode_id="read-only")
                last = [("mode", "read-only"), ("options", {"mode": "read-only", "model": "big"})]
                assert await mine.until(5) == mode + model + last
                assert await rest_settings(events) == ("mode_changed", "read-only")
                assert await rest_settings(events) == ("config_changed", {"mode": "read-only", "model": "big"})
                assert await theirs.until(5) == mode + model + last


async def test_a_title_set_by_the_first_prompt_or_renamed_reaches_every_connection_once() -> None:
    async with LoopbackModel() as loopback, running_daemon(loopback, settings=PICKABLE, token=TOKEN) as served:
        loopback.enqueue(Answer(text="on it"))
        mine, theirs = Watcher(), Watcher()
        # WebSocket: the SDK's Streamable HTTP client sends no Acp-Session-Id with an extension method.
        async with sdk_connection(served, "ws", mine) as a, sdk_connection(served, "ws", theirs) as b:
            session_id = (await a.new_session(cwd="/tmp", mcp_servers=[])).session_id
            await b.resume_session(session_id=session_id, cwd="/tmp")
            with anyio.fail_after(10):
                answer = await a.prompt(session_id=session_id, prompt=[text_block("Fix the parser\nplease")])
            assert answer.stop_reason == "end_turn"
            assert await theirs.until(1) == [("title", "Fix the parser")]

            rename = {"sessionId": session_id, "title": "Parser work"}
            assert await b.ext_method("acp-server/set_title", rename) == {}
            assert await b.ext_method("acp-server/set_title", rename) == {}  # the same title: nothing
            await a.ext_method("acp-server/set_title", {"sessionId": session_id, "title": "Parser, done"})
            titles = [("title", "Fix the parser"), ("title", "Parser work"), ("title", "Parser, done")]
            assert await theirs.until(3) == titles
            assert await mine.until(3) == titles
