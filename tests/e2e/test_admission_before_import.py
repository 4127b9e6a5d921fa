"""Admission never waits on an import: a fresh agent process (stdio, and ``serve``) whose warm-up thread is still
importing the model client (made slow on purpose: the import of ``openai`` blocks until the test releases it)
admits and refuses prompts at once — the refusals come back before the first prompt starts, and before the warm-up
ends.

Ordering is by events (the release comes only after the refusals were read), never by wall-clock.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from acp_server.bridge import PromptQueueFullError
from acp_server.daemon import ANNOUNCE_PREFIX

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio

# The agent, with a finder that makes the first import of each module named in argv[2] (``openai``: in whichever
# thread asks first, the warm-up) run until the file named by argv[1] exists — holding that module's import lock
# only (not the global one), as a real slow import on a loaded machine does.
SLOW_IMPORT_LAUNCHER = """
import importlib.machinery, os, sys, time

class SlowLoader:
    def __init__(self, loader, release):
        self.loader, self.release = loader, release

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        while not os.path.exists(self.release):  # a slow import: run under the module's own import lock only
            time.sleep(0.01)
        self.loader.exec_module(module)

class HoldImports:
    def __init__(self, release, names):
        self.release, self.names = release, set(names)

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        self.names.discard(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = SlowLoader(spec.loader, self.release)
        return spec

sys.meta_path.insert(0, HoldImports(sys.argv[1], sys.argv[2].split(",")))
sys.argv = ["acp-server", *sys.argv[3:]]
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
    launcher = [sys.executable, "-c", SLOW_IMPORT_LAUNCHER, str(release), "openai"]
    monkeypatch.setattr("tests.e2e._agent.COMMAND", launcher)
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



@asynccontextmanager
async def _serving(release: Path, held: str, args: list[str]) -> AsyncIterator[httpx2.AsyncClient]:
    """``acp-server serve`` with the first import of ``held`` (comma-separated modules) running until ``release``
    exists; a client of its URL. The process is terminated on exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    command = [sys.executable, "-c", SLOW_IMPORT_LAUNCHER, str(release), held, *args]
    async with await anyio.open_process(command, env=env, stdin=subprocess.DEVNULL) as process:
        try:
            assert process.stderr is not None
            stderr = b""
            with anyio.fail_after(30):
                async for chunk in process.stderr:
                    stderr += chunk
                    found = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"(\S+)\n", stderr)
                    if found:
                        break
            async with httpx2.AsyncClient(base_url=found.group(1).decode(), timeout=30) as client:
                yield client
        finally:
            await anyio.Path(release).touch()  # nothing stays held: the process can end
            process.terminate()
            with anyio.fail_after(15):
                await process.wait()


SERVE = ["serve", "--offline", "--no-persist", "--port", "0", "--max-pending-prompts-per-session", str(LIMIT)]
PROMPT_BODY = {"prompt": [{"type": "text", "text": "go"}]}


@pytest.mark.timeout(120)
async def test_the_daemon_answers_eight_prompts_during_a_slow_warm_up_three_with_503(tmp_path: Path) -> None:
    release = tmp_path / "release-openai-import"
    async with _serving(release, "openai", SERVE) as client:
        session_id = (await client.post("/session", json={"cwd": str(tmp_path)})).json()["sessionId"]
        with anyio.fail_after(30):  # bounded: without the fix the loop waits for the release
            statuses = [
                (await client.post(f"/session/{session_id}/prompt", json=PROMPT_BODY)).status_code
                for _ in range(PROMPTS)
            ]  # each answered while the warm-up still holds the import
        assert not release.exists()
        assert statuses == [202] * LIMIT + [503] * (PROMPTS - LIMIT)
        release.touch()
        async with client.stream("GET", f"/session/{session_id}/events?lastEventId=0") as events:
            ended: list[str] = []
            with anyio.fail_after(60):
                async for sse in httpx2.EventSource(events):
                    if sse.event in ("turn_complete", "turn_error"):
                        ended.append(json.loads(sse.data).get("stopReason", sse.event))
                        if len(ended) == LIMIT:
                            break
        assert ended == ["end_turn"] * LIMIT


@pytest.mark.timeout(120)
async def test_a_prompt_waiting_for_the_schema_import_leaves_the_daemon_answering(tmp_path: Path) -> None:
    """The REST prompt needs the ACP schema to parse its content: while the warm-up still imports it, that prompt
    waits — in a worker thread, not on the event loop — and every other request is answered meanwhile."""
    release = tmp_path / "release-schema-import"
    async with _serving(release, "acp.schema", SERVE) as client:
        session_id = (await client.post("/session", json={"cwd": str(tmp_path)})).json()["sessionId"]
        async with anyio.create_task_group() as tg:
            answers: list[int] = []

            async def send_prompt() -> None:
                answers.append((await client.post(f"/session/{session_id}/prompt", json=PROMPT_BODY)).status_code)

            tg.start_soon(send_prompt)
            with anyio.fail_after(30):  # bounded: without the fix the loop waits for the release
                for _ in range(3):  # the prompt is on its way (or waiting) meanwhile: the daemon answers
                    assert (await client.get("/health")).status_code == 200
                    assert (await client.post("/session", json={"cwd": str(tmp_path)})).status_code == 201
            assert not answers and not release.exists()  # the prompt still waits for the schema
            release.touch()
        assert answers == [202]
