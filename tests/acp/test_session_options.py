"""What the editor shows around a conversation, over a real bridge with a recording peer: the model option (after
the mode, switched with ``session/set_config_option``, stored, announced), usage (``usage_update`` with a known
window, per-turn totals in the answer's ``_meta``), the title (``session_info_update`` with the first update of the
prompt that sets it, and the ``_acp-server/set_title`` extension), and the prompt queue as ``initialize`` advertises
it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from acp.schema import (
    ForkSessionResponse,
    InitializeResponse,
    NewSessionResponse,
    SessionNotification,
    SetSessionConfigOptionResponse,
)

from acp_server.acp import AcpAgent, AgentOptions, bind
from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.domain import Emit, Message, Prompt, StopReason, TextChunk, UsageReported
from acp_server.errors import InvalidInputError
from acp_server.turn import ModelCatalog
from tests.docs_pages import page

from ._support import FakePeer, InProcessAgent

pytestmark = pytest.mark.anyio


class UsageRunner:
    """Per prompt: one model request per ``usage`` entry, each a chunk then its usage; records the model it saw."""

    def __init__(self, catalog: ModelCatalog, usage: list[UsageReported]) -> None:
        self.catalog = catalog
        self.usage = usage
        self.models: list[str] = []

    async def __call__(self, session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        await session.begin_turn(prompt, Message("user", prompt.title))
        for event in self.usage:
            self.models.append(self.catalog.resolve(session.model))
            await emit(TextChunk("x"))
            await emit(event)
        await session.end_turn(Message("assistant", "x" * len(self.usage)))
        return "end_turn"


class Agent(InProcessAgent):
    def __init__(self, bridge: SessionBridge, runner: UsageRunner) -> None:
        super().__init__(bridge)
        self.runner = runner

    async def prompt(self, session_id: str, text: str, peer: FakePeer) -> Any:
        return await self.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, peer
        )


@asynccontextmanager
async def agent(catalog: ModelCatalog | None = None, usage: list[UsageReported] | None = None) -> AsyncIterator[Agent]:
    catalog = catalog if catalog is not None else ModelCatalog("m", ("m", "big"))
    runner = UsageRunner(catalog, usage or [])
    async with SessionBridge(runner, models=catalog) as bridge:
        yield Agent(bridge, runner)


def _updates(peer: FakePeer, kind: str) -> list[dict[str, Any]]:
    return [params["update"] for _, params in peer.notifications if params["update"]["sessionUpdate"] == kind]


async def test_the_model_option_follows_the_mode_option_in_every_session_answer() -> None:
    async with agent() as a:
        reply = await a.new_session()
        NewSessionResponse.model_validate(reply)
        mode, model = reply["configOptions"]
        assert mode["id"] == "mode"
        assert model == {
            "type": "select",
            "id": "model",
            "name": "Model",
            "description": "The model that answers the next requests of this session",
            "category": "model",
            "currentValue": "m",
            "options": [{"value": "m", "name": "m"}, {"value": "big", "name": "big"}],
        }
        resumed = await a.call("session/resume", {"sessionId": reply["sessionId"], "cwd": "/tmp"})
        assert [o["id"] for o in resumed["configOptions"]] == ["mode", "model"]


async def test_a_runner_without_a_catalog_offers_no_model_option() -> None:
    runner = UsageRunner(ModelCatalog("m"), [])
    async with SessionBridge(runner) as bridge:
        requests = bind(AcpAgent(bridge, AgentOptions()))[0]
        reply = await requests["session/new"]({"cwd": "/tmp", "mcpServers": []}, FakePeer(1, bridge))
        assert [o["id"] for o in reply["configOptions"]] == ["mode"]
        with pytest.raises(InvalidInputError, match=r"available: mode$"):
            params = {"sessionId": reply["sessionId"], "configId": "model", "value": "m"}
            await requests["session/set_config_option"](params, FakePeer(2, bridge))


async def test_picking_a_model_stores_it_announces_it_and_the_next_request_uses_it() -> None:
    async with agent(usage=[UsageReported(1, 1)]) as a:
        session_id = (await a.new_session())["sessionId"]
        await a.prompt(session_id, "before", FakePeer(2, a.bridge))
        peer = FakePeer(3, a.bridge)
        answer = await a.call(
            "session/set_config_option", {"sessionId": session_id, "configId": "model", "value": "big"}, peer
        )
        SetSessionConfigOptionResponse.model_validate(answer)
        assert answer["configOptions"][1]["currentValue"] == "big"
        [update] = [params for _, params in peer.notifications]
        SessionNotification.model_validate(update)
        assert update["update"]["sessionUpdate"] == "config_option_update"
        assert update["update"]["configOptions"] == answer["configOptions"]
        await a.prompt(session_id, "after", FakePeer(4, a.bridge))
        record = await a.bridge.store.get_session(session_id)
        assert record is not None and record.model == "big"
        assert a.runner.models == ["m", "big"]


async def test_a_fork_answers_the_options_it_inherited() -> None:
    async with agent() as a:
        session_id = (await a.new_session())["sessionId"]
        params = {"sessionId": session_id, "configId": "model", "value": "big"}
        await a.call("session/set_config_option", params, FakePeer(2, a.bridge))
        forked = await a.call("session/fork", {"sessionId": session_id, "cwd": "/tmp"}, FakePeer(3, a.bridge))
    ForkSessionResponse.model_validate(forked)
    assert forked["sessionId"] != session_id
    assert [(o["id"], o["currentValue"]) for o in forked["configOptions"]] == [("mode", "default"), ("model", "big")]
    assert forked["modes"]["currentModeId"] == "default"


@pytest.mark.parametrize(("config_id", "value", "field"), [("model", "nope", "value"), ("colour", "m", "configId")])
async def test_an_unknown_model_or_option_is_invalid_params_and_changes_nothing(
    config_id: str, value: str, field: str
) -> None:
    async with agent() as a:
        session_id = (await a.new_session())["sessionId"]
        peer = FakePeer(2, a.bridge)
        with pytest.raises(InvalidInputError) as refused:
            await a.call(
                "session/set_config_option", {"sessionId": session_id, "configId": config_id, "value": value}, peer
            )
        assert refused.value.errors[0]["field"] == field
        assert "available: " in str(refused.value)
        assert peer.notifications == []
        assert a.bridge.get(session_id).model is None


async def test_usage_updates_carry_a_known_window_and_the_answer_carries_the_turn_s_totals() -> None:
    usage = [UsageReported(100, 20, 1000), UsageReported(150, 5, None), UsageReported(170, 30, 1000)]
    async with agent(usage=usage) as a:
        session_id = (await a.new_session())["sessionId"]
        peer = FakePeer(2, a.bridge)
        reply = await a.prompt(session_id, "go", peer)
    assert reply == {
        "stopReason": "end_turn",
        "_meta": {"acpServer": {"usage": {"inputTokens": 420, "outputTokens": 55, "totalTokens": 475, "requests": 3}}},
    }
    meters = _updates(peer, "usage_update")
    assert meters == [  # the request whose window is unknown sends none: ACP requires ``size``
        {"sessionUpdate": "usage_update", "used": 120, "size": 1000},
        {"sessionUpdate": "usage_update", "used": 200, "size": 1000},
    ]
    for _, params in peer.notifications:
        SessionNotification.model_validate(params)
    kinds = [params["update"]["sessionUpdate"] for _, params in peer.notifications]
    assert kinds == ["session_info_update", "agent_message_chunk", "usage_update"] + ["agent_message_chunk"] * 2 + [
        "usage_update"
    ]


async def test_a_prompt_without_usage_answers_its_stop_reason_alone() -> None:
    async with agent() as a:
        session_id = (await a.new_session())["sessionId"]
        assert await a.prompt(session_id, "go", FakePeer(2, a.bridge)) == {"stopReason": "end_turn"}


async def test_the_first_prompt_s_title_is_announced_once_with_its_first_update() -> None:
    async with agent(usage=[UsageReported(1, 1)]) as a:
        session_id = (await a.new_session())["sessionId"]
        first = FakePeer(2, a.bridge)
        await a.prompt(session_id, "Fix the parser\nplease", first)
        [info] = _updates(first, "session_info_update")
        assert info["title"] == "Fix the parser"
        assert info["updatedAt"].endswith("Z")
        assert first.notifications[0][1]["update"] is info  # before the turn's own first update
        second = FakePeer(3, a.bridge)
        await a.prompt(session_id, "and more", second)
        assert _updates(second, "session_info_update") == []
        listed = await a.call("session/list", {})
        assert listed["sessions"][0]["title"] == "Fix the parser"


async def test_set_title_stores_announces_and_clears() -> None:
    async with agent(usage=[UsageReported(1, 1)]) as a:
        session_id = (await a.new_session())["sessionId"]
        peer = FakePeer(2, a.bridge)
        assert await a.call("_acp-server/set_title", {"sessionId": session_id, "title": "  Parser work "}, peer) == {}
        [info] = _updates(peer, "session_info_update")
        SessionNotification.model_validate({"sessionId": session_id, "update": info})
        assert info["title"] == "Parser work"
        record = await a.bridge.store.get_session(session_id)
        assert record is not None and record.title == "Parser work"
        prompted = FakePeer(3, a.bridge)
        await a.prompt(session_id, "does not rename it", prompted)
        assert _updates(prompted, "session_info_update") == []
        cleared = FakePeer(4, a.bridge)
        await a.call("_acp-server/set_title", {"sessionId": session_id, "title": ""}, cleared)
        assert _updates(cleared, "session_info_update")[0]["title"] is None
        renamed = FakePeer(5, a.bridge)
        await a.prompt(session_id, "the next prompt titles it again", renamed)
        assert _updates(renamed, "session_info_update")[0]["title"] == "the next prompt titles it again"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ([], "(root)"),
        ({"title": "t"}, "sessionId"),
        ({"sessionId": "s", "title": 3}, "title"),
        ({"sessionId": "s", "title": "two\nlines"}, "title"),
        ({"sessionId": "s", "title": "x" * 201}, "title"),
    ],
)
async def test_set_title_params_are_checked(params: Any, field: str) -> None:
    async with agent() as a:
        with pytest.raises(InvalidInputError) as refused:
            await a.call("_acp-server/set_title", params)
    assert refused.value.errors[0]["field"] == field
    assert str(refused.value).startswith("Invalid params for _acp-server/set_title: ")


def _readme_prompt_queue() -> Any:
    """The JSON block docs/protocol.md shows under "Prompt queue" as what ``initialize`` advertises."""
    text = page("protocol.md")
    section = text[text.index("_meta.acpServer.promptQueue`") :]
    block = section[section.index("```json") + len("```json") : section.index("```", section.index("```json") + 7)]
    return json.loads(block)


async def test_initialize_advertises_what_a_client_may_rely_on_of_the_queue() -> None:
    async with agent() as a:
        reply = await a.call("initialize", {"protocolVersion": 1})
    InitializeResponse.model_validate(reply)
    advertised = reply["agentCapabilities"]["_meta"]["acpServer"]["promptQueue"]
    assert advertised == _readme_prompt_queue()  # the manual documents exactly what is advertised
    assert advertised == {
        "maxPendingPromptsPerSession": 5,
        "queuesWhileRunning": True,
        "order": "fifo",
        "whenFull": {"code": -32603, "errorKind": "prompt_queue_full", "retryable": True},
        "cancelScope": "session",
        "withdrawWaiting": "$/cancel_request",
    }
