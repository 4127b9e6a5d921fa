"""Shared fixtures and the fast loop's guard.

- ``anyio_backend``: asyncio by default; a module or test picks another with a marker (``virtual_time``: trio on a
  MockClock; ``asyncio_debug``) or parametrizes it (``@pytest.mark.parametrize("anyio_backend", [...])``).
- ``e2e``: a test that takes :func:`acp_server_command` is marked ``e2e`` at collection; one that starts
  ``acp_server`` (``-m acp_server``, ``acp-server``) without the marker fails (the fast loop, ``-m "not e2e"``,
  spawns no agent or daemon).
- ``pg_dsn``: an empty database in a throwaway PostgreSQL cluster (one per session, so one per xdist worker).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from ._postgres import Cluster, find_bindir, throwaway_cluster

# Hypothesis keeps its files (examples, constants) in the user's cache, never in the working tree (its default is
# ./.hypothesis).
set_hypothesis_home_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acp-server" / "hypothesis")


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """asyncio; ``@pytest.mark.virtual_time``: trio on a MockClock that jumps as soon as every task waits
    (``virtual_time(autojump=0.05)``: once they have waited that long in real time; ``autojump=None``: only when the
    test jumps it, ``trio.lowlevel.current_clock().jump(s)``); ``@pytest.mark.asyncio_debug``: asyncio's debug mode."""
    virtual = request.node.get_closest_marker("virtual_time")
    if virtual is not None:
        import trio.testing

        autojump = virtual.kwargs.get("autojump", 0)
        clock = trio.testing.MockClock() if autojump is None else trio.testing.MockClock(autojump_threshold=autojump)
        return ("trio", {"clock": clock})
    if request.node.get_closest_marker("asyncio_debug") is not None:
        return ("asyncio", {"debug": True})
    return "asyncio"


# --- e2e: the tests that start the agent or daemon as a process ------------------------------------------------

SPAWNING_FIXTURES = frozenset({"acp_server_command"})


@pytest.fixture
def acp_server_command() -> list[str]:
    """The command that starts this checkout's agent (``serve`` and its options follow); the test is ``e2e``."""
    return [sys.executable, "-m", "acp_server"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SPAWNING_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


# ``-m acp_server`` (an argument of its own, or inside a ``-c`` program), or ``acp-server`` run as a command
_STARTS_ACP_SERVER = re.compile(r"""-m['",\s]*acp_server\b(?!\.)|(?:^|[\s;&|(/])acp-server(?:\s|$)""")


def starts_acp_server(args: Any) -> bool:
    """Whether a command (as handed to ``subprocess.Popen``) starts the agent or daemon: ``-m acp_server``, an
    executable named ``acp-server``, or a shell program that runs either. A path that merely ends in ``acp-server``
    as another program's argument (a sandbox hiding the agent's config directory) starts nothing."""
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args]
    words = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]
    if any(a == "-m" and b == "acp_server" for a, b in itertools.pairwise(words)):
        return True
    if words and os.path.basename(words[0]) == "acp-server":
        return True
    programs = [word for word in words if any(c.isspace() or c in ";&|(" for c in word)]  # sh -c '…', python -c '…'
    return any(_STARTS_ACP_SERVER.search(program) for program in programs)


@pytest.fixture(autouse=True)
def _fast_loop_spawns_no_agent(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Outside ``e2e`` tests, starting ``acp_server`` as a process fails the test: every process start (subprocess,
    asyncio's and trio's alike) goes through ``Popen._execute_child``."""
    if request.node.get_closest_marker("e2e") is not None:
        yield
        return
    started: list[Any] = []
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> Any:
        if starts_acp_server(args):
            started.append(args)
            raise RuntimeError(f"{request.node.nodeid} starts acp_server but is not marked e2e: {args!r}")
        return execute_child(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", guarded)
    yield
    if started:
        pytest.fail(
            f"starts acp_server as a process but is not marked e2e (the fast loop, -m 'not e2e', must not): {started}"
            "; take the acp_server_command fixture or mark it @pytest.mark.e2e",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _isolated_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents started by a test keep their session database in a temporary directory, never in ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    # nor read the user's configuration file (~/.config/acp-server/config.toml): an empty configuration home
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb); .ci/run installs it")
    with throwaway_cluster(bindir) as cluster:
        import psycopg

        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE tests")
        yield cluster


@pytest.fixture
def pg_dsn(pg_cluster: Cluster) -> str:
    """An empty database in the throwaway cluster: the tests' one database, emptied (the previous test's connections
    ended, its schema dropped); a new database per test cost 0.1–0.3 s and 8 MB of disk each."""
    import psycopg

    dsn = pg_cluster.dsn.replace("/postgres?", "/tests?")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return dsn
