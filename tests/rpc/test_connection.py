"""One ACP connection (``rpc.Connection``), whatever carries it: a real bridge with a scripted turn behind it, a
recording transport in front. Its shutdown order is the one both faces get: the bridge stops being heard, a
transport that cannot deliver is abandoned before the prompts are cancelled, every request is answered once, and only
then is the transport told to finish."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_server.acp import AgentOptions
from acp_server.bridge import SessionBridge
from acp_server.rpc import Connection

from ..cli.test_order_and_shutdown import scripted

pytestmark = pytest.mark.anyio


class Recording:
    """A transport that records what reaches it, in order: ``("put"|"send", message)``, ``"abandon"``, ``"finish"``."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.changed = anyio.Event()

    def _record(self, event: Any) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = anyio.Event()

    def put(self, message: dict[str, Any]) -> None:
        self._record(("put", message))

    async def send(self, message: dict[str, Any], origin: str | int | None = None) -> None:
        self._record(("send", message))

    def abandon(self) -> None:
        self._record("abandon")

    async def finish(self, grace_s: float) -> None:
        self._record("finish")

    def answer(self, msg_id: int) -> dict[str, Any] | None:
        return next((m for kind, m in self._messages() if kind == "put" and m.get("id") == msg_id), None)

    def index(self, event: Any) -> int:
        return self.events.index(event)

    def _messages(self) -> list[tuple[str, dict[str, Any]]]:
        return [event for event in self.events if isinstance(event, tuple)]

    async def until_answered(self, msg_id: int) -> dict[str, Any]:
        with anyio.fail_after(10):
            while (answer := self.answer(msg_id)) is None:
                await self.changed.wait()
        return answer


def request(msg_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


async def open_prompt(connection: Connection, transport: Recording, text: str) -> str:
    connection.feed(request(1, "session/new", {"cwd": "/w", "mcpServers": []}))
    session_id = str((await transport.until_answered(1))["result"]["sessionId"])
    connection.feed(request(2, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}))
    await anyio.wait_all_tasks_blocked()
    return session_id


@pytest.mark.parametrize("deliver", [True, False])
async def test_close_cancels_the_prompts_answers_each_request_then_finishes_the_transport(deliver: bool) -> None:
    transport = Recording()
    async with SessionBridge(scripted) as bridge:
        connection = Connection(transport, bridge, AgentOptions())
        await open_prompt(connection, transport, "hang")
        assert transport.answer(2) is None  # the prompt hangs until cancelled
        await connection.aclose(deliver=deliver)
        answer = transport.answer(2)
        assert answer is not None and answer["result"]["stopReason"] == "cancelled"
        assert transport.events[-1] == "finish"  # after every answer
        if deliver:
            assert "abandon" not in transport.events
        else:  # abandoned before the prompt was cancelled: its answer comes after (and a real transport drops it)
            assert transport.index("abandon") < transport.index(("put", answer))
        count = len(transport.events)
        await connection.aclose(deliver=deliver)  # idempotent
        assert len(transport.events) == count


async def test_news_of_a_session_changed_elsewhere_is_posted_on_the_transport_until_the_close() -> None:
    transport = Recording()
    async with SessionBridge(scripted) as bridge:
        connection = Connection(transport, bridge, AgentOptions())
        session_id = await open_prompt(connection, transport, "quick")
        await transport.until_answered(2)
        before = len(transport.events)
        await bridge.get(session_id).set_title("renamed elsewhere")  # as another face would
        news = transport.events[before:]
        assert [(kind, m["params"]["update"].get("title")) for kind, m in news] == [("put", "renamed elsewhere")]
        await connection.aclose()
        before = len(transport.events)
        await bridge.get(session_id).set_title("renamed after the close")
        assert transport.events[before:] == []  # the bridge is no longer heard
