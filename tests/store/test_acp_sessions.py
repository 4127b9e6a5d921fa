"""The ACP session methods in-process (``AcpAgent``'s bound method table over a recording peer): capabilities, the
exact replay of ``session/load``, ``session/list`` pages, params errors. Every update and reply is checked against
``acp.schema``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ListSessionsResponse, SessionNotification

from acp_server.acp import AcpAgent, AgentOptions, bind, replay_updates
from acp_server.bridge import SessionBridge, SessionEntry, SessionNotFoundError
from acp_server.domain import Emit, ImagePart, Prompt, PromptPart, ResourceLinkPart, ResourcePart, StopReason, TextPart
from acp_server.errors import InvalidInputError
from acp_server.store import SessionStore, SqliteSessionStore, StoreUnavailableError

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


def dump(model: Any) -> Any:
    """The wire form the official models give: camelCase aliases, no unset optionals."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Peer:
    """A connection that records what the handlers send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Mapping[str, Any]]] = []

    @property
    def request_id(self) -> str | int | None:
        return 1

    def admitted(self) -> None:
        return None

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        self.sent.append((method, params))

    def after_reply(self, method: str, params: Mapping[str, Any]) -> None:
        return None  # the commands update that follows an answer: not what these tests look at

    def cancel_request(self, request_id: str | int) -> bool:
        return False


class Agent:
    """``AcpAgent`` as a dispatcher calls it: by ACP method name, params validated by the method table first."""

    def __init__(self, bridge: SessionBridge, peer: Peer) -> None:
        self.peer = peer
        self._requests, _ = bind(AcpAgent(bridge, AgentOptions()))

    async def call(self, method: str, params: Any) -> Any:
        return await self._requests[method](params, self.peer)


async def _never(session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
    raise AssertionError("no prompt runs in these tests")


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[tuple[Agent, Peer, SessionStore]]:
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(_never, store=store) as bridge:
        peer = Peer()
        yield Agent(bridge, peer), peer, store


async def _record(
    store: SessionStore,
    session_id: str,
    parts: tuple[PromptPart, ...],
    answer: str,
    reasoning: str = "",
    outcome: str = "complete",
    *,
    known: int,
) -> None:
    text = " ".join(p.text for p in parts if isinstance(p, TextPart))
    ticket = await store.begin_turn(session_id, known=known, content=text, parts=parts, title=text)
    stop = {"complete": "end_turn", "cancelled": "cancelled"}.get(outcome)
    await store.end_turn(ticket, content=answer, reasoning=reasoning, stop_reason=stop, outcome=outcome)  # type: ignore[arg-type]


def _kinds(peer: Peer) -> list[tuple[str, str, str | None, Any]]:
    out = []
    for method, params in peer.sent:
        assert method == "session/update"
        # valid, and exactly what the official model dumps (replay builds the dicts itself, for speed)
        assert dump(SessionNotification.model_validate(params)) == params
        update = params["update"]
        content = update["content"]
        body = content.get("text", content.get("uri", content.get("resource", {}).get("uri")))
        out.append((update["sessionUpdate"], body, update.get("messageId"), update.get("_meta")))
    return out


async def test_initialize_advertises_durable_sessions(agent: tuple[Agent, Peer, SessionStore]) -> None:
    acp_agent, _, _ = agent
    reply = await acp_agent.call("initialize", {"protocolVersion": 1})
    capabilities = reply["agentCapabilities"]
    assert capabilities["loadSession"] is True
    assert capabilities["sessionCapabilities"] == {
        "list": {}, "resume": {}, "close": {}, "fork": {}, "delete": {}, "additionalDirectories": {},
        "title": {}, "status": {}, "systemPrompt": {"mode": {"override": {}}},
    }
    assert capabilities["_meta"]["acpServer"]["sessionStore"] == {"persistent": True, "available": True}


async def test_load_replays_the_history_exactly_then_answers(agent: tuple[Agent, Peer, SessionStore]) -> None:
    acp_agent, peer, store = agent
    sid = (await acp_agent.call("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
    parts: tuple[PromptPart, ...] = (
        TextPart("see"),
        ResourceLinkPart("file:///a.py", "a.py"),
        ResourcePart("file:///b.txt", "bee", "text/plain"),
        ImagePart("aGk=", "image/png"),
    )
    await _record(store, sid, parts, "seen", "looking", known=0)
    await _record(store, sid, (TextPart("stop"),), "par", outcome="cancelled", known=2)
    await _record(store, sid, (TextPart("think only"),), "", "thoughts", outcome="failed", known=4)
    await _record(store, sid, (TextPart("silent"),), "", outcome="failed", known=6)
    await _record(store, sid, (TextPart("empty"),), "", known=8)  # complete and empty: nothing to show
    await store.begin_turn(sid, known=10, content="running", parts=(TextPart("running"),), title="")

    answer = await acp_agent.call("session/load", {"sessionId": sid, "cwd": "/w", "mcpServers": []})
    assert set(answer) == {"modes", "configOptions"}  # the history went as updates, before the answer
    cancelled = {"acpServer": {"outcome": "cancelled", "stopReason": "cancelled"}}
    assert _kinds(peer) == [
        ("user_message_chunk", "see", f"{sid}/1", None),
        ("user_message_chunk", "file:///a.py", f"{sid}/1", None),
        ("user_message_chunk", "file:///b.txt", f"{sid}/1", None),
        ("user_message_chunk", None, f"{sid}/1", None),  # the image
        ("agent_thought_chunk", "looking", f"{sid}/2.0.thought", None),
        ("agent_message_chunk", "seen", f"{sid}/2.0", None),
        ("user_message_chunk", "stop", f"{sid}/3", None),
        ("agent_message_chunk", "par", f"{sid}/4.0", cancelled),
        ("user_message_chunk", "think only", f"{sid}/5", None),
        ("agent_thought_chunk", "thoughts", f"{sid}/6.0.thought", {"acpServer": {"outcome": "failed"}}),
        ("user_message_chunk", "silent", f"{sid}/7", None),
        ("agent_message_chunk", "", f"{sid}/8.0", {"acpServer": {"outcome": "failed"}}),
        ("user_message_chunk", "empty", f"{sid}/9", None),
        ("user_message_chunk", "running", f"{sid}/11", None),
        ("agent_message_chunk", "", f"{sid}/12.0", {"acpServer": {"outcome": "running"}}),
    ]
    image = peer.sent[3][1]["update"]["content"]
    assert image == {"type": "image", "data": "aGk=", "mimeType": "image/png"}


async def test_replay_of_a_user_message_without_parts_uses_its_text() -> None:
    from acp_server.store import StoredMessage

    (update,) = replay_updates("s", [StoredMessage(1, "user", "plain")])
    assert update["update"]["content"] == {"type": "text", "text": "plain"}


async def test_list_pages_are_valid_session_info(agent: tuple[Agent, Peer, SessionStore]) -> None:
    acp_agent, _, store = agent
    ids = [(await acp_agent.call("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"] for _ in range(51)]
    await _record(store, ids[0], (TextPart("title me"),), "ok", known=0)
    first = await acp_agent.call("session/list", {"cwd": "/w"})
    ListSessionsResponse.model_validate(first)
    assert len(first["sessions"]) == 50 and "nextCursor" in first
    top = first["sessions"][0]
    assert top["sessionId"] == ids[0] and top["title"] == "title me" and top["updatedAt"].endswith("Z")
    second = await acp_agent.call("session/list", {"cwd": "/w", "cursor": first["nextCursor"]})
    ListSessionsResponse.model_validate(second)
    assert "nextCursor" not in second
    assert {s["sessionId"] for s in first["sessions"] + second["sessions"]} == set(ids)
    assert (await acp_agent.call("session/list", None))["sessions"][0]["sessionId"] == ids[0]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("session/load", {"sessionId": "s", "cwd": "relative", "mcpServers": []}),
        ("session/resume", {"sessionId": "s", "cwd": "relative"}),
        ("session/list", {"cwd": "relative"}),
        ("session/load", {"sessionId": "s", "cwd": "/w"}),  # mcpServers is required
        ("session/close", {}),
    ],
)
async def test_params_errors(agent: tuple[Agent, Peer, SessionStore], method: str, params: Any) -> None:
    acp_agent, _, _ = agent
    with pytest.raises(InvalidInputError):
        await acp_agent.call(method, params)


async def test_unknown_sessions(agent: tuple[Agent, Peer, SessionStore]) -> None:
    acp_agent, peer, _ = agent
    with pytest.raises(SessionNotFoundError):
        await acp_agent.call("session/load", {"sessionId": "nope", "cwd": "/w", "mcpServers": []})
    with pytest.raises(SessionNotFoundError):
        await acp_agent.call("session/resume", {"sessionId": "nope", "cwd": "/w"})
    with pytest.raises(SessionNotFoundError):
        await acp_agent.call("session/close", {"sessionId": "nope"})
    assert peer.sent == []


async def test_capabilities_report_an_unavailable_store(tmp_path: Path) -> None:
    (tmp_path / "sessions.db").write_bytes(b"not sqlite" * 50)
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(_never, store=store) as bridge:
        acp_agent = Agent(bridge, Peer())
        reply = await acp_agent.call("initialize", {"protocolVersion": 1})
        status = reply["agentCapabilities"]["_meta"]["acpServer"]["sessionStore"]
        assert status["available"] is False and status["errorKind"] == "store_unavailable"
        assert str(tmp_path / "sessions.db") in status["message"]
        with pytest.raises(StoreUnavailableError):
            await acp_agent.call("session/new", {"cwd": "/w", "mcpServers": []})
