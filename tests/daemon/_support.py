"""A daemon on 127.0.0.1:0 in this process (real uvicorn, real sockets) over the loopback model, and an SSE reader.

``running_daemon(model, ...)`` builds the stack exactly like ``acp-server serve`` (``open_bridge`` + ``open_daemon``)
and yields a :class:`Served` with an ``httpx2`` client pointed at it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema

from acp_server.bridge import SessionBridge
from acp_server.cli._stdio import open_bridge
from acp_server.config import Settings
from acp_server.daemon import AcpOverHttp, Daemon, DaemonOptions, daemon_modes, open_daemon
from acp_server.modes import READ_ONLY_MODE
from acp_server.provider.offline import LoopbackModel

ROOT = Path(__file__).resolve().parents[2]
OPENAPI: dict[str, Any] = json.loads((ROOT / "schemas" / "openapi.json").read_text())
TEXT = [{"type": "text", "text": "hello"}]


def schema_validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator of ``#/components/schemas/<name>`` of the OpenAPI document (refs resolve inside it)."""
    root = {"components": OPENAPI["components"], "$ref": f"#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(root)


def assert_documented(method: str, template: str, response: httpx2.Response) -> None:
    """The response's status is documented for the route and its JSON body matches the documented schema."""
    operation = OPENAPI["paths"][template][method.lower()]
    documented = operation["responses"].get(str(response.status_code))
    assert documented is not None, f"{method} {template} answered undocumented {response.status_code}"
    content = documented.get("content", {})
    if "application/json" in content:
        root = {"components": OPENAPI["components"], **content["application/json"]["schema"]}
        jsonschema.Draft202012Validator(root).validate(response.json())
    else:
        assert response.status_code in (204,) or "text/event-stream" in content


def assert_event_documented(event: str, data: Any) -> None:
    events = OPENAPI["paths"]["/session/{sessionId}/events"]["get"]["x-sse-events"]
    assert event in events, f"undocumented event {event}"
    root = {"components": OPENAPI["components"], **events[event]}
    jsonschema.Draft202012Validator(root).validate(data)


@dataclass
class Event:
    id: int
    event: str
    data: dict[str, Any]


class EventReader:
    """Reads one SSE response event by event (every one checked against the OpenAPI document)."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self._events = httpx2.EventSource(response).__aiter__()

    async def next(self, timeout: float = 5.0) -> Event:
        with anyio.fail_after(timeout):
            sse = await self._events.__anext__()
        data = json.loads(sse.data)
        assert_event_documented(sse.event, data)
        return Event(int(sse.id), sse.event, data)

    async def until(self, predicate: Callable[[Event], bool], timeout: float = 5.0) -> list[Event]:
        """Every event up to and including the first that matches."""
        seen: list[Event] = []
        with anyio.fail_after(timeout):
            while True:
                event = await self.next(timeout)
                seen.append(event)
                if predicate(event):
                    return seen

    async def until_ended(self, timeout: float = 5.0) -> list[Event]:
        """Every event until the server ends the stream."""
        seen: list[Event] = []
        with anyio.fail_after(timeout):
            while True:
                try:
                    seen.append(await self.next(timeout))
                except StopAsyncIteration:
                    return seen


@dataclass
class Served:
    url: str
    daemon: Daemon
    bridge: SessionBridge
    client: httpx2.AsyncClient
    acp: AcpOverHttp  # /acp's connections

    async def new_session(self, cwd: str = "/tmp") -> str:
        response = await self.client.post("/session", json={"cwd": cwd})
        assert response.status_code == 201, response.text
        session_id: str = response.json()["sessionId"]
        return session_id

    async def prompt(self, session_id: str, text: str = "hello", **params: str) -> httpx2.Response:
        body = {"prompt": [{"type": "text", "text": text}]}
        return await self.client.post(f"/session/{session_id}/prompt", json=body, params=params)

    @asynccontextmanager
    async def events(self, session_id: str, last_event_id: int | None = None) -> AsyncIterator[EventReader]:
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        async with self.client.stream("GET", f"/session/{session_id}/events", headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            yield EventReader(response)


def serve_bridge(settings: Settings, token: str | None = None) -> AbstractAsyncContextManager[SessionBridge]:
    """The bridge ``acp-server serve`` builds: the daemon's modes (tokenless: read-only only, its default too)."""
    modes = daemon_modes(token=token, allow_bypass_permissions=settings.allow_bypass_permissions)
    if not token:
        settings = replace(settings, default_mode=READ_ONLY_MODE)
    return open_bridge(settings, modes=modes)


@asynccontextmanager
async def running_daemon(
    model: LoopbackModel | None,
    *,
    settings: Settings | None = None,
    token: str | None = None,
    **options: Any,
) -> AsyncIterator[Served]:
    """The serve stack on 127.0.0.1:0; ``settings`` defaults to the loopback model with the default limit."""
    base = settings or Settings()
    if model is not None:
        base = replace(base, base_url=model.base_url, model=base.model or "m")
    daemon_options = DaemonOptions(port=0, token=token, **options)
    async with serve_bridge(base, token) as bridge, open_daemon(bridge, daemon_options) as running:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(base_url=running.url, headers=headers, timeout=10) as client:
            yield Served(running.url, running.daemon, bridge, client, running.acp)
