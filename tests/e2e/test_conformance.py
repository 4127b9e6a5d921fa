"""Conformance: the official ACP Python SDK drives a real ``acp-server`` process over real pipes, against the
scriptable loopback model. Every ``session/update`` the server wrote (counted from the raw stream) must have been
received by the SDK, which silently drops invalid ones."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process
from acp.schema import AgentMessageChunk, AgentThoughtChunk, SessionNotification

from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip
from tests.acp_blocks import text_block

pytestmark = pytest.mark.anyio


class RecordingClient:
    """The client side: records every update the SDK delivers."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.chunk_arrived = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, AgentMessageChunk):
            self.chunk_arrived.set()

    def on_connect(self, conn: Any) -> None:
        pass

    def text(self, kind: type, since: int = 0) -> str:
        return "".join(u.content.text for _, u in self.updates[since:] if isinstance(u, kind))


async def test_official_client_full_session(tmp_path: Path) -> None:
    raw_path = tmp_path / "stdout.jsonl"
    client = RecordingClient()
    async with LoopbackModel() as model:
        model.enqueue(
            Answer(text="first answer here", reasoning="thinking about it"),
            Answer(text="second answer"),
            SlowDrip(interval_s=0.02, text="word " * 2000),
        )
        agent = [sys.executable, "-m", "acp_server", "--no-persist", "--base-url", model.base_url, "--model", "m"]
        server = shlex.join(agent)
        command = f"{server} | tee {shlex.quote(str(raw_path))}"
        async with spawn_agent_process(client, "sh", "-c", command) as (conn, _process):
            init = await conn.initialize(protocol_version=1)
            assert init.protocol_version == 1
            assert init.agent_capabilities is not None
            assert init.agent_capabilities.prompt_capabilities.embedded_context is True

            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            first = await conn.prompt(session_id=session.session_id, prompt=[text_block("hello")])
            assert first.stop_reason == "end_turn"
            assert client.text(AgentMessageChunk) == "first answer here"
            assert client.text(AgentThoughtChunk) == "thinking about it"

            mark = len(client.updates)
            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("and again")])
            assert second.stop_reason == "end_turn"
            assert client.text(AgentMessageChunk, mark) == "second answer"
            history = model.requests[1].body["messages"]
            assert [m["role"] for m in history[1:]] == ["user", "assistant", "user"]
            assert history[2]["content"] == "first answer here"

            client.chunk_arrived = anyio.Event()
            mark = len(client.updates)
            async with anyio.create_task_group() as tg:
                result: dict[str, Any] = {}

                async def long_prompt() -> None:
                    result["response"] = await conn.prompt(
                        session_id=session.session_id, prompt=[text_block("tell me a long story")]
                    )

                tg.start_soon(long_prompt)
                with anyio.fail_after(10):
                    await client.chunk_arrived.wait()
                await conn.cancel(session_id=session.session_id)
            assert result["response"].stop_reason == "cancelled"
            with anyio.fail_after(5):
                await model.wait_for_disconnects(1)
            assert len(client.updates) > mark

    raw = [json.loads(line) for line in raw_path.read_text().splitlines()]
    written = [m for m in raw if m.get("method") == "session/update"]
    assert len(written) == len(client.updates)
    for message in written:
        SessionNotification.model_validate(message["params"])
    assert all(m.get("jsonrpc") == "2.0" for m in raw)
