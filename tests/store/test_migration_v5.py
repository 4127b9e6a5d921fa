"""A database made by the version 5 code (``data/v5.sqlite3``, see ``data/make_v5.py``) upgrades in place to version
6: everything reads as before, with no additional directories, and the upgraded sessions store theirs from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.store import SCHEMA_VERSION, SqliteSessionStore, _sqlite

from ._support import copy_of
from .test_migration_v3 import EXPECTED

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "v5.sqlite3"


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return copy_of(FIXTURE, tmp_path)


def _columns(raw: sqlite3.Connection) -> set[str]:
    return {row[1] for row in raw.execute("PRAGMA table_info(sessions)")}


def test_the_fixture_is_a_version_5_database_of_ours(old_db: Path) -> None:
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (5,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        assert "additional_directories" not in _columns(raw)
    raw.close()
    assert SCHEMA_VERSION >= 6  # version 7 has its own fixture, made by the version 6 code (data/make_v6.py)


async def test_a_version_5_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is None
        page = await store.list_sessions()
        assert [r.session_id for r in page.sessions] == list(EXPECTED)
        for record in page.sessions:
            cwd, title, mode, model, history = EXPECTED[record.session_id]
            assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, mode, model)
            assert record.additional_directories == ()
            snapshot = await store.read_session(record.session_id)
            assert snapshot is not None and snapshot.record == record and snapshot.messages == history
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert "additional_directories" in _columns(raw)
    raw.close()


async def test_an_upgraded_session_stores_its_additional_directories(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        await store.set_additional_directories("alpha", ("/work/lib", "/work/docs"))
    async with SqliteSessionStore(old_db) as store:
        alpha = await store.get_session("alpha")
        beta = await store.get_session("beta")
        assert alpha is not None and alpha.additional_directories == ("/work/lib", "/work/docs")
        assert beta is not None and beta.additional_directories == ()
