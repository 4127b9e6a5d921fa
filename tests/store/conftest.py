"""Fixtures: a fresh store of each kind (the contract holds for both), on asyncio and trio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_server.store import MemorySessionStore, SessionStore, SqliteSessionStore


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened: SessionStore = (
        SqliteSessionStore(tmp_path / "state" / "sessions.db") if request.param == "sqlite" else MemorySessionStore()
    )
    async with opened:
        yield opened
