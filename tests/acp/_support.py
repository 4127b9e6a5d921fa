"""A scriptable turn runner, a recording peer and a bridge over a memory store, for the ACP handler tests.

The runner's behaviour is chosen by the first text part of the prompt:
- ``"emit:<n>"`` emits ``ThoughtChunk("t<i>")`` then ``TextChunk("c<i>")`` for i < n, returns ``end_turn``;
- ``"stop:<reason>"`` returns that stop reason at once;
- ``"block"`` waits until released by the test (:meth:`Runner.release`) or cancelled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio

from acp_server.acp import AcpAgent, AgentOptions, bind
from acp_server.acp._methods import NotificationHandler, RequestHandler
from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.domain import Emit, Prompt, StopReason, TextChunk, TextPart, ThoughtChunk


class Runner:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.clients: list[object] = []  # the client each turn was given, in order
        self.cancelled: list[str] = []
        self.running = anyio.Event()
        self._release = anyio.Event()

    def release(self) -> None:
        self._release.set()

    async def __call__(self, session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        first = prompt.parts[0]
        text = first.text if isinstance(first, TextPart) else ""
        self.started.append(text)
        self.clients.append(client)
        if text.startswith("emit:"):
            for i in range(int(text.split(":")[1])):
                await emit(ThoughtChunk(f"t{i}"))
                await emit(TextChunk(f"c{i}"))
            return "end_turn"
        if text.startswith("stop:"):
            return cast(StopReason, text.split(":")[1])
        self.running.set()
        try:
            await self._release.wait()
        except BaseException:
            self.cancelled.append(text)
            raise
        return "end_turn"


class FakePeer:
    """The connection as a handler sees it: records notifications, admissions and cancel requests."""

    def __init__(self, request_id: str | int | None, bridge: SessionBridge | None = None) -> None:
        self._request_id = request_id
        self._bridge = bridge
        self.log: list[tuple[str, Any]] = []  # ("notify", (method, params)) and ("admitted", pending counts)
        self.cancel_requests: list[str | int] = []
        self.cancel_answer = False

    @property
    def request_id(self) -> str | int | None:
        return self._request_id

    @property
    def notifications(self) -> list[tuple[str, Mapping[str, Any]]]:
        return [entry for kind, entry in self.log if kind == "notify"]

    @property
    def admissions(self) -> list[dict[str, int]]:
        return [entry for kind, entry in self.log if kind == "admitted"]

    def admitted(self) -> None:
        counts = {s.session_id: s.pending_prompt_count for s in self._bridge.sessions} if self._bridge else {}
        self.log.append(("admitted", counts))

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        self.log.append(("notify", (method, params)))

    def after_reply(self, method: str, params: Mapping[str, Any]) -> None:
        self.log.append(("after_reply", (method, params)))

    @property
    def after_replies(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The notifications queued to follow the answer, in order."""
        return [entry for kind, entry in self.log if kind == "after_reply"]

    def cancel_request(self, request_id: str | int) -> bool:
        self.cancel_requests.append(request_id)
        return self.cancel_answer


class Bound:
    """One connection's agent over a bridge: its bound request and notification tables."""

    def __init__(self, bridge: SessionBridge, runner: Runner) -> None:
        self.bridge = bridge
        self.runner = runner
        self.agent = AcpAgent(bridge, AgentOptions())
        tables = bind(self.agent)
        self.requests: dict[str, RequestHandler] = tables[0]
        self.notifications: dict[str, NotificationHandler] = tables[1]

    def peer(self, request_id: str | int | None = 1) -> FakePeer:
        return FakePeer(request_id, self.bridge)

    async def new_session(self) -> str:
        reply = await self.requests["session/new"]({"cwd": "/tmp", "mcpServers": []}, self.peer())
        return str(reply["sessionId"])

    async def prompt(self, session_id: str, text: str, peer: FakePeer) -> Any:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.requests["session/prompt"](params, peer)


@asynccontextmanager
async def bound(max_pending: int | None = 5) -> AsyncIterator[Bound]:
    runner = Runner()
    async with SessionBridge(runner, max_pending_prompts_per_session=max_pending) as bridge:
        yield Bound(bridge, runner)


class InProcessAgent:
    """The ACP handlers of one ``AcpAgent`` over ``bridge``, called as a client would (each call a ``FakePeer``)."""

    def __init__(self, bridge: SessionBridge) -> None:
        self.bridge = bridge
        self.requests: dict[str, RequestHandler] = bind(AcpAgent(bridge, AgentOptions()))[0]

    async def call(self, method: str, params: Any, peer: FakePeer | None = None) -> Any:
        return await self.requests[method](params, peer if peer is not None else FakePeer(1, self.bridge))

    async def new_session(self) -> dict[str, Any]:
        reply: dict[str, Any] = await self.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        return reply
