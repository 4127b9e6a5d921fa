"""Fixtures: a fresh store of each kind (the contract holds for all), on asyncio and trio.

``postgres``: a fresh database per test in one throwaway cluster per test session (skipped, with the reason, only
where Debian's PostgreSQL binaries cannot be found).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from acp_server.store import MemorySessionStore, SessionStore, SqliteSessionStore
from acp_server.store._postgres import PostgresSessionStore

from ._postgres import Cluster, find_bindir, throwaway_cluster

_databases = itertools.count()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb); .ci/run installs it")
    with throwaway_cluster(bindir) as cluster:
        yield cluster


@pytest.fixture
def pg_dsn(pg_cluster: Cluster) -> str:
    """A new, empty database in the throwaway cluster."""
    import psycopg

    name = f"t{next(_databases)}"
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_cluster.dsn.replace("/postgres?", f"/{name}?")


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
