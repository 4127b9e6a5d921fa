"""A PostgreSQL cluster of a test module's own, to stop and start (``Cluster.stop``/``start``) and whose backends a
test ends (:func:`end_backends`); ``dsn``: a new, empty database in it per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import psycopg
import pytest

from tests._postgres import Cluster, find_bindir, throwaway_cluster

__all__ = ["cluster", "dsn", "end_backends"]

_databases = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb); .ci/run installs it")
    with throwaway_cluster(bindir) as made:
        yield made


@pytest.fixture
def dsn(cluster: Cluster) -> str:
    """A new, empty database in the module's cluster."""
    name = f"r{next(_databases)}"
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return cluster.dsn.replace("/postgres?", f"/{name}?")


def end_backends(cluster: Cluster, condition: str, *params: object) -> None:
    """End the backends ``condition`` selects in ``pg_stat_activity``; returns once they are gone (the server waits for
    them itself: ``pg_terminate_backend``'s timeout, one minute at most)."""
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity "
            f"WHERE pid <> pg_backend_pid() AND {condition}",
            params,
        ).fetchall()
    assert ended and all(done for (done,) in ended), ended
