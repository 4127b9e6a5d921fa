"""The prompt queue end to end: the official ACP client floods one session over real pipes; the server admits
``limit`` prompts, answers them in order, and refuses the rest at once with the exact structured data."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import jsonschema
import pytest
from acp import RequestError, spawn_agent_process
from acp.schema import AgentMessageChunk

from acp_server.provider.offline import Answer, LoopbackModel
from tests.acp_blocks import text_block

pytestmark = pytest.mark.anyio

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


class Client:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            self.chunks.append(update.content.text)

    def on_connect(self, conn: Any) -> None:
        pass


async def test_eight_overlapping_prompts_five_admitted_in_order_three_refused(tmp_path: Path) -> None:
    schema = json.loads((SCHEMAS / "prompt_queue_full.json").read_text())
    client = Client()
    async with LoopbackModel() as model:
        model.enqueue(*(Answer(text=f"answer-{i}", reasoning="", chunk_delay_s=0.1) for i in range(5)))
        model.enqueue(Answer(text="answer-late", reasoning=""))
        args = ["-m", "acp_server", "--no-persist", "--base-url", model.base_url, "--model", "m"]
        async with spawn_agent_process(client, sys.executable, *args) as (conn, _process):
            await conn.initialize(protocol_version=1)
            session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            outcomes: dict[int, Any] = {}
            finished: list[int] = []
            three_refused = anyio.Event()

            async def send(i: int) -> None:
                try:
                    outcomes[i] = await conn.prompt(session_id=session_id, prompt=[text_block(f"prompt-{i}")])
                    finished.append(i)
                except RequestError as exc:
                    outcomes[i] = exc
                    if sum(isinstance(o, RequestError) for o in outcomes.values()) == 3:
                        three_refused.set()

            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(send, i)
                    await anyio.lowlevel.checkpoint()  # start (and so write) them in order
                with anyio.fail_after(10):
                    await three_refused.wait()
                assert not finished, "refusals must come before any admitted prompt completes"

            refused = {i: o for i, o in outcomes.items() if isinstance(o, RequestError)}
            assert sorted(refused) == [5, 6, 7]
            for error in refused.values():
                assert error.code == -32603
                assert error.data == {
                    "errorKind": "prompt_queue_full",
                    "sessionId": session_id,
                    "limit": 5,
                    "pendingCount": 5,
                    "retryable": True,
                }
                jsonschema.validate(error.data, schema)
                assert str(error) == f'Prompt queue full for session "{session_id}" (5/5 pending)'
            assert finished == [0, 1, 2, 3, 4]
            assert all(outcomes[i].stop_reason == "end_turn" for i in range(5))
            sent = [r.body["messages"][-1]["content"] for r in model.requests]
            assert sent == [f"prompt-{i}" for i in range(5)]
            assert "".join(client.chunks) == "".join(f"answer-{i}" for i in range(5))

            late = await conn.prompt(session_id=session_id, prompt=[text_block("late")])
            assert late.stop_reason == "end_turn"


async def test_slot_comes_back_when_the_running_prompt_finishes(tmp_path: Path) -> None:
    """With a limit of 1: a second prompt is refused while the first runs, and admitted once it has finished."""
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="slow", reasoning="", chunk_delay_s=0.3), Answer(text="next", reasoning=""))
        args = [
            "-m",
            "acp_server",
            "--no-persist",
            "--base-url",
            model.base_url,
            "--model",
            "m",
            "--max-pending-prompts-per-session",
            "1",
        ]
        async with spawn_agent_process(Client(), sys.executable, *args) as (conn, _process):
            init = await conn.initialize(protocol_version=1)
            assert init.agent_capabilities.field_meta["acpServer"]["promptQueue"]["maxPendingPromptsPerSession"] == 1
            session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            async with anyio.create_task_group() as tg:
                tg.start_soon(conn.prompt, session_id, [text_block("first")])
                await model.wait_for_requests(1)
                with pytest.raises(RequestError) as refused:
                    await conn.prompt(session_id=session_id, prompt=[text_block("too soon")])
                assert refused.value.data["pendingCount"] == 1 and refused.value.data["limit"] == 1
            again = await conn.prompt(session_id=session_id, prompt=[text_block("now")])
            assert again.stop_reason == "end_turn"
