"""Two real ``acp-server serve`` processes on one PostgreSQL database: a session attached by one is ``session_busy``
(409, ``Retry-After``, ``instance`` = the holder's ``/health`` instance) in the other; kill -9 of the holder lets the
other attach it at once, with every finished turn."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import psycopg
import pytest

from tests.e2e._agent import announced_url

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

PROMPT = {"prompt": [{"type": "text", "text": "hello"}]}


@dataclass
class Daemon:
    process: anyio.abc.Process
    client: httpx2.AsyncClient

    async def instance(self) -> str:
        health = await self.client.get("/health")
        assert health.status_code == 200
        instance: str = health.json()["instance"]
        return instance


@asynccontextmanager
async def serve(dsn: str, state: Path) -> AsyncIterator[Daemon]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env.update(ACP_SERVER_STORE=dsn, XDG_STATE_HOME=str(state))
    command = [sys.executable, "-m", "acp_server", "serve", "--port", "0", "--offline"]
    process = await anyio.open_process(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        url = await announced_url(process)
        async with httpx2.AsyncClient(base_url=url, timeout=30) as client:
            yield Daemon(process, client)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()


async def test_a_held_session_is_busy_elsewhere_and_free_the_instant_its_holder_is_killed(
    pg_dsn: str, tmp_path: Path
) -> None:
    async with serve(pg_dsn, tmp_path / "a") as a, serve(pg_dsn, tmp_path / "b") as b:
        holder = await a.instance()
        assert holder != await b.instance() and f"-{a.process.pid}-" in holder
        created = await a.client.post("/session", json={"cwd": str(tmp_path)})
        assert created.status_code == 201, created.text
        session_id = created.json()["sessionId"]
        done = await a.client.post(f"/session/{session_id}/prompt?wait=true", json=PROMPT)
        assert done.status_code == 200, done.text

        busy = await b.client.post(f"/session/{session_id}/resume", json={"cwd": str(tmp_path)})
        assert busy.status_code == 409, busy.text
        assert busy.headers["retry-after"] == "5"
        body = busy.json()
        assert (body["code"], body["sessionId"], body["instance"]) == ("session_busy", session_id, holder)
        again = await a.client.post(f"/session/{session_id}/resume", json={"cwd": str(tmp_path)})
        assert again.status_code == 200  # its owner attaches it as often as asked

        a.process.kill()  # SIGKILL: no close, no release; the server ends its backend and the locks with it
        await a.process.wait()
        taken = await b.client.post(f"/session/{session_id}/resume", json={"cwd": str(tmp_path)})
        assert taken.status_code == 200, taken.text
        answered = await b.client.post(f"/session/{session_id}/prompt?wait=true", json=PROMPT)
        assert answered.status_code == 200, answered.text

    with psycopg.connect(pg_dsn) as conn:
        outcomes = conn.execute(
            "SELECT role, outcome FROM messages WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()
    assert outcomes == [("user", "complete"), ("assistant", "complete")] * 2  # the killed owner's turn kept
