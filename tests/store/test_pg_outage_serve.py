"""A real ``acp-server serve`` on PostgreSQL through the database's outages: a restart of the server, its data
connection ended, its lock connection ended. ``/health`` answers 503 (``store_io_error``, the database cannot be
reached) while the store cannot be used and 200 once it can; afterwards a prompt of the session it held and a new
session's prompt succeed, and the session is still this process's own."""

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
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests._postgres import Cluster
from tests.e2e._agent import announced_url
from tests.store._restarts import cluster, dsn, end_backends

__all__ = ["cluster", "dsn"]  # fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]  # starts acp_server as a process

PROMPT = {"prompt": [{"type": "text", "text": "hello"}]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Daemon:
    process: anyio.abc.Process
    client: httpx2.AsyncClient
    cwd: str

    async def instance(self) -> str:
        health = await self.client.get("/health")
        assert health.status_code == 200, health.text
        instance: str = health.json()["instance"]
        return instance

    async def new_session(self) -> str:
        created = await self.client.post("/session", json={"cwd": self.cwd})
        assert created.status_code == 201, created.text
        session_id: str = created.json()["sessionId"]
        return session_id

    async def prompt(self, session_id: str) -> None:
        done = await self.client.post(f"/session/{session_id}/prompt?wait=true", json=PROMPT)
        assert done.status_code == 200, done.text
        assert done.json()["stopReason"] == "end_turn"


@asynccontextmanager
async def serve(dsn: str, state: Path) -> AsyncIterator[Daemon]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env.update(ACP_SERVER_STORE=dsn, XDG_STATE_HOME=str(state))
    command = [sys.executable, "-m", "acp_server", "serve", "--port", "0", "--offline"]
    process = await anyio.open_process(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        url = await announced_url(process)
        async with httpx2.AsyncClient(base_url=url, timeout=60) as client:
            yield Daemon(process, client, str(state))
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()


async def still_ours(dsn: str, state: Path, session_id: str, holder: str) -> None:
    """Another process is refused the session: its owner re-took the lock."""
    async with serve(dsn, state) as other:
        busy = await other.client.post(f"/session/{session_id}/resume", json={"cwd": str(state)})
        assert busy.status_code == 409, busy.text
        assert busy.json()["instance"] == holder


async def test_a_restart_of_the_database_is_503_while_it_lasts_and_served_again_after(
    cluster: Cluster, dsn: str, tmp_path: Path
) -> None:
    async with serve(dsn, tmp_path / "a") as a:
        holder = await a.instance()
        session_id = await a.new_session()
        await a.prompt(session_id)
        cluster.stop()
        try:
            down = await a.client.get("/health")
            assert down.status_code == 503, down.text
            body = down.json()
            assert (body["status"], body["instance"], body["code"]) == ("unavailable", holder, "store_io_error")
            assert "the database cannot be reached" in body["error"] and "password" not in body["error"]
        finally:
            cluster.start()
        assert await a.instance() == holder  # 200 again: the backoff waited out, the store reached
        await a.prompt(session_id)
        await a.prompt(await a.new_session())
        await still_ours(dsn, tmp_path / "b", session_id, holder)


async def test_the_data_connection_ended_is_made_again_at_the_next_call(
    cluster: Cluster, dsn: str, tmp_path: Path
) -> None:
    async with serve(dsn, tmp_path / "a") as a:
        holder = await a.instance()
        session_id = await a.new_session()
        await a.prompt(session_id)
        db = conninfo_to_dict(dsn)["dbname"]
        end_backends(cluster, "datname = %s AND application_name <> %s", db, holder)
        assert await a.instance() == holder  # /health right after: 200, on a new connection
        await a.prompt(session_id)
        await a.prompt(await a.new_session())


async def test_the_lock_connection_ended_re_takes_its_locks_and_attaches_again(
    cluster: Cluster, dsn: str, tmp_path: Path
) -> None:
    async with serve(dsn, tmp_path / "a") as a:
        holder = await a.instance()
        session_id = await a.new_session()
        await a.prompt(session_id)
        end_backends(cluster, "application_name = %s", holder)
        assert await a.instance() == holder  # /health right after: 200, the locks re-taken
        await still_ours(dsn, tmp_path / "b", session_id, holder)
        await a.prompt(session_id)
        await a.prompt(await a.new_session())
