"""Fixtures: a fresh store of each kind (the contract holds for all), on asyncio and trio.

``postgres``: a fresh database per test (``pg_dsn``, from ``tests/conftest.py``: one throwaway cluster per test
session, skipped with the reason only where Debian's PostgreSQL binaries cannot be found).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_server.store import MemorySessionStore, SessionStore, SqliteSessionStore
from acp_server.store._postgres import PostgresSessionStore


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened: SessionStore
    if request.param == "postgres":
        opened = PostgresSessionStore(request.getfixturevalue("pg_dsn"))
    elif request.param == "sqlite":
        opened = SqliteSessionStore(tmp_path / "state" / "sessions.db")
    else:
        opened = MemorySessionStore()
    async with opened:
        yield opened
