"""A database made by the version 6 code (``data/v6.sqlite3``, see ``data/make_v6.py``) upgrades in place to version
7: everything reads as before, with no rewinds, and the upgraded sessions store theirs from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.store import SCHEMA_VERSION, Rewind, SqliteSessionStore, _sqlite

from ._support import copy_of
from .test_migration_v3 import EXPECTED

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "v6.sqlite3"


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return copy_of(FIXTURE, tmp_path)


def _tables(raw: sqlite3.Connection) -> set[str]:
    return {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_the_fixture_is_a_version_6_database_of_ours(old_db: Path) -> None:
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (6,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        assert "rewinds" not in _tables(raw)
    raw.close()
    assert SCHEMA_VERSION >= 7  # version 8 has its own fixture, made by the version 7 code (data/make_v7.py)


async def test_a_version_6_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is None
        page = await store.list_sessions()
        assert [r.session_id for r in page.sessions] == list(EXPECTED)
        for record in page.sessions:
            cwd, title, mode, model, history = EXPECTED[record.session_id]
            assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, mode, model)
            snapshot = await store.read_session(record.session_id)
            assert snapshot is not None and snapshot.messages == history and snapshot.rewinds == ()
        alpha = await store.get_session("alpha")
        assert alpha is not None and alpha.additional_directories == ("/work/lib",)
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert "rewinds" in _tables(raw)
    raw.close()


async def test_an_upgraded_session_keeps_its_rewinds_and_a_fork_copies_them(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        await store.record_rewind("alpha", Rewind(3, 4))
        await store.record_rewind("alpha", Rewind(3, 4))  # a rerun after a kill: the same rewind, kept once
        await store.fork_session("alpha", "epsilon", cwd="/work/fork")
    async with SqliteSessionStore(old_db) as store:
        alpha = await store.read_session("alpha")
        epsilon = await store.read_session("epsilon")
        assert alpha is not None and alpha.rewinds == (Rewind(3, 4),)
        assert epsilon is not None and epsilon.rewinds == (Rewind(3, 4),)
        await store.delete_session("alpha")
        assert await store.read_session("alpha") is None
