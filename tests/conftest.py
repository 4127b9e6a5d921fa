"""Shared fixtures: tests run on asyncio by default (modules needing virtual time override ``anyio_backend``); a
throwaway PostgreSQL cluster for the tests that need one (``pg_dsn``: a fresh database in it)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from ._postgres import Cluster, find_bindir, throwaway_cluster

# Hypothesis keeps its files (examples, constants) in the user's cache, never in the working tree (its default is
# ./.hypothesis).
set_hypothesis_home_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acp-server" / "hypothesis")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents started by a test keep their session database in a temporary directory, never in ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    # nor read the user's configuration file (~/.config/acp-server/config.toml): an empty configuration home
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


_databases = itertools.count()


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
