"""Admission never waits on an import: a fresh agent process whose warm-up thread is still importing the model
client (made slow on purpose: the import of ``openai`` blocks until the test releases it) admits and refuses
prompts at once — the refusals come back before the first prompt starts, and before the warm-up ends.

Ordering is by events (the release comes only after the refusals were read), never by wall-clock.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.bridge import PromptQueueFullError

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio

# The agent, with a finder that holds the first import of ``openai`` (in whichever thread asks first: the
# warm-up) until the file named by argv[1] exists — the import lock of ``openai`` is held meanwhile, as in a
# real slow import on a loaded machine.
SLOW_IMPORT_LAUNCHER = """
import os, sys, time

class HoldOpenAI:
    def __init__(self, release):
        self.release, self.held = release, False

    def find_spec(self, name, path=None, target=None):
        if name == "openai" and not self.held:
            self.held = True
            while not os.path.exists(self.release):
                time.sleep(0.01)
        return None

sys.meta_path.insert(0, HoldOpenAI(sys.argv[1]))
sys.argv = ["acp-server", *sys.argv[2:]]
from acp_server.cli import main
sys.exit(main())
"""

PROMPTS = 8
LIMIT = 5


def prompt_request(msg_id: int, session_id: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "session/prompt",
        "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    }


@pytest.mark.timeout(120)
async def test_eight_prompts_during_a_slow_warm_up_three_refused_before_the_first_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tmp_path / "release-openai-import"
    monkeypatch.setattr("tests.e2e._agent.COMMAND", [sys.executable, "-c", SLOW_IMPORT_LAUNCHER, str(release)])
    args = ["--offline", "--no-persist", "--max-pending-prompts-per-session", str(LIMIT)]
    async with spawn_agent(*args) as agent:
        await agent.initialize()
        session_id = await agent.new_session(str(tmp_path))
        assert not release.exists()  # the warm-up is still importing the model client

        ids = [agent.next_id() for _ in range(PROMPTS)]
        await agent.send_raw(
            b"".join(_line(prompt_request(i, session_id, f"prompt {n}")) for n, i in enumerate(ids))
        )
        before_release = await _until_refusals(agent, 3)
        release.touch()  # the warm-up's import may end now; only now can the first prompt start
        after_release = await _until_answered(agent, set(ids) - {m["id"] for m in before_release if "id" in m})

    refusals = [m for m in before_release if "error" in m]
    assert [m["id"] for m in refusals] == ids[LIMIT:]  # the last three, each refused at once
    for refusal in refusals:
        assert refusal["error"]["data"]["errorKind"] == PromptQueueFullError.error_kind
        assert refusal["error"]["data"]["pendingCount"] == LIMIT
    assert not [m for m in before_release if m.get("method") == "session/update"], "a prompt started first"
    answers = [m for m in after_release if "id" in m and "method" not in m]
    assert sorted(m["id"] for m in answers) == ids[:LIMIT]
    assert all(m["result"]["stopReason"] == "end_turn" for m in answers), answers


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def _until_refusals(agent: AgentProcess, count: int) -> list[dict[str, Any]]:
    """Every message until ``count`` error responses came (bounded: without the fix they never come)."""
    seen: list[dict[str, Any]] = []
    while sum("error" in m for m in seen) < count:
        seen.append(await agent.receive(timeout=30))
    return seen


async def _until_answered(agent: AgentProcess, ids: set[int]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while ids:
        message = await agent.receive(timeout=60)
        seen.append(message)
        if "method" not in message:
            ids.discard(message.get("id"))  # type: ignore[arg-type]
    return seen

