"""A long session over real pipes and real processes: the agent compacts before the offline model's window overflows
(the client sees the note as a thought, then a ``usage_update``), a prompt too large gets a structured
``context_window_exceeded`` error and the session goes on, and a new process that loads the session replays the
whole history, uses the stored compaction and is never refused on its first prompt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, Behaviour, LoopbackModel

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio

WINDOW = 4000
SUMMARY = "Goal: numbered words. State: going on."


def _words(n: int, seed: int) -> str:
    return " ".join(f"w{(seed * 7 + i) % 100:02d}" for i in range(n))


def _summaries(body: dict[str, Any]) -> Behaviour | None:
    first = body["messages"][0].get("content")
    return Answer(text=SUMMARY, reasoning="") if isinstance(first, str) and "You are compacting" in first else None


@asynccontextmanager
async def _agent(model: LoopbackModel, state: Path, home: Path) -> AsyncIterator[AgentProcess]:
    args = ("--state-dir", str(state), "--base-url", model.base_url, "--model", "m", "--context-window", str(WINDOW))
    async with spawn_agent(*args, env={"HOME": str(home), "XDG_STATE_HOME": str(home / "state")}) as agent:
        await agent.initialize()
        yield agent


async def _ask(agent: AgentProcess, session_id: str, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return await agent.until_response(await agent.request_nowait("session/prompt", params), timeout=20)


def _updates(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in seen if m.get("method") == "session/update"]


async def test_compaction_is_seen_durable_and_used_by_a_new_process(tmp_path: Path) -> None:
    state = tmp_path / "state-dir"
    cwd = str(tmp_path)
    async with LoopbackModel() as model:
        model.context_window = WINDOW
        model.answer_with = _summaries
        async with _agent(model, state, tmp_path) as a:
            session_id = await a.new_session(cwd)
            updates: list[dict[str, Any]] = []
            for i in range(12):
                reply, seen = await _ask(a, session_id, _words(100, i))
                assert reply["result"]["stopReason"] == "end_turn", (reply, a.stderr[-2000:])
                updates.extend(_updates(seen))
            notes = [
                (n, u) for n, u in enumerate(updates)
                if u["sessionUpdate"] == "agent_thought_chunk" and "ompact" in u["content"]["text"]
            ]
            assert notes, updates
            done = next(n for n, u in notes if u["content"]["text"].startswith("Conversation compacted"))
            assert "messages 1–" in updates[done]["content"]["text"]
            usage = updates[done + 1]
            assert usage["sessionUpdate"] == "usage_update" and usage["size"] == WINDOW and usage["used"] < WINDOW
            reply, _ = await _ask(a, session_id, _words(6000, 1))  # larger than the window alone
            error = reply["error"]
            assert error["data"]["errorKind"] == "context_window_exceeded", error
            assert error["data"]["contextWindow"] == WINDOW and error["data"]["estimatedTokens"] > WINDOW
            reply, _ = await _ask(a, session_id, "short one")
            assert reply["result"]["stopReason"] == "end_turn"
        assert model.refusals == []
        asked = len(model.requests)

        async with _agent(model, state, tmp_path) as b:
            msg_id = await b.request_nowait("session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []})
            loaded, seen = await b.until_response(msg_id, timeout=20)
            assert "result" in loaded, loaded
            prompts = [u["content"]["text"] for u in _updates(seen) if u["sessionUpdate"] == "user_message_chunk"]
            assert prompts == [*(_words(100, i) for i in range(12)), _words(6000, 1), "short one"]  # never shortened
            marks = [u for u in _updates(seen) if "compactedThrough" in u.get("_meta", {}).get("acpServer", {})]
            assert len(marks) == 1 and marks[0]["sessionUpdate"] == "agent_thought_chunk"  # where the summary ends
            reply, _ = await _ask(b, session_id, "after the load")
            assert reply["result"]["stopReason"] == "end_turn", (reply, b.stderr[-2000:])
            first = model.requests[asked].body["messages"]
            assert SUMMARY in first[0]["content"] and first[-1]["content"] == "after the load"
            assert len(first) < 2 * 14
        assert model.refusals == []


async def test_a_window_too_small_is_said_at_session_new_and_at_each_prompt_precisely(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        args = ("--base-url", model.base_url, "--model", "m", "--context-window", "2048", "--no-persist")
        async with spawn_agent(*args, env={"HOME": str(tmp_path)}) as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))  # its commands first, then the notice
            told = await agent.receive()
            assert told["params"]["update"]["sessionUpdate"] == "agent_message_chunk", told
            assert "(2048 tokens) is too small" in told["params"]["update"]["content"]["text"]
            for text in ("hello there", "and again"):
                reply, _ = await _ask(agent, session_id, text)
                data = reply["error"]["data"]
                assert data["errorKind"] == "context_window_too_small", reply
                assert data["contextWindow"] == 2048 and data["neededTokens"] > 2048
                assert {part["what"] for part in data["parts"]} >= {"instructions", "built-in tools"}
                assert "shorter prompt" not in reply["error"]["message"]
        assert model.requests == []  # nothing sent, no summary asked
