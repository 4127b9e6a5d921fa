"""A window that cannot work is said once, at ``session/new``: an agent message following the answer names what
takes the room and what would help; a window that can work, or an unknown one, says nothing. The real
``ModelTurn`` over the loopback model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp.schema import SessionNotification

from acp_server.acp import AcpAgent, AgentOptions, bind
from acp_server.bridge import SessionBridge
from acp_server.provider.offline import LoopbackModel
from acp_server.turn import ModelSettings, ModelTurn

from ._support import FakePeer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _new_session(tmp_path: Path, window: int | None) -> AsyncIterator[list[dict[str, Any]]]:
    async with LoopbackModel() as model:
        turn = ModelTurn(ModelSettings(base_url=model.base_url, model="m", context_window=window))
        try:
            async with SessionBridge(turn, models=turn.models) as bridge:
                new = bind(AcpAgent(bridge, AgentOptions()))[0]["session/new"]
                peer = FakePeer(1, bridge)
                await new({"cwd": str(tmp_path), "mcpServers": []}, peer)
                messages = [p for _, p in peer.after_replies if p["update"]["sessionUpdate"] == "agent_message_chunk"]
                yield messages
                assert model.requests == []  # telling sends nothing to the model
        finally:
            await turn.aclose()


async def test_a_new_session_is_told_once_that_its_window_is_too_small(tmp_path: Path) -> None:
    async with _new_session(tmp_path, 2048) as messages:
        [message] = messages
        SessionNotification.model_validate(message)
        text = message["update"]["content"]["text"]
        assert "(2048 tokens) is too small for this session" in text
        assert "built-in tools" in text and "instructions" in text and "read-only mode" in text


@pytest.mark.parametrize("window", [None, 128_000])
async def test_a_window_that_can_work_or_an_unknown_one_says_nothing(tmp_path: Path, window: int | None) -> None:
    async with _new_session(tmp_path, window) as messages:
        assert messages == []
