"""A database made by the version 4 code (``data/v4.sqlite3``, see ``data/make_v4.py``) upgrades in place to version
5: everything reads as before (no usage, no compaction), the killed turn's journaled steps included, and the
upgraded sessions take compactions and usage from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.domain import Compaction, ContextUsage, TextPart
from acp_server.store import SCHEMA_VERSION, SqliteSessionStore, _sqlite

from ._support import copy_of
from .test_migration_v2 import _ALPHA
from .test_migration_v3 import EXPECTED, _tables  # the same sessions, made again by the version 4 code

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "v4.sqlite3"


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return copy_of(FIXTURE, tmp_path)


def test_the_fixture_is_a_version_4_database_of_ours(old_db: Path) -> None:
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (4,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        assert "compactions" not in _tables(raw)
        assert raw.execute("SELECT count(*) FROM answer_calls").fetchone() == (2,)  # the killed turn's journal
    raw.close()
    assert SCHEMA_VERSION >= 5  # version 6 has its own fixture, made by the version 5 code (data/make_v5.py)


async def test_a_version_4_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is None
        page = await store.list_sessions()
        assert [r.session_id for r in page.sessions] == list(EXPECTED)
        for record in page.sessions:
            cwd, title, mode, model, history = EXPECTED[record.session_id]
            assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, mode, model)
            snapshot = await store.read_session(record.session_id)
            assert snapshot is not None and snapshot.record == record
            assert snapshot.messages == history and snapshot.compaction is None
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert "compactions" in _tables(raw)
    raw.close()


async def test_an_upgraded_session_takes_usage_and_compactions(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        ticket = await store.begin_turn("alpha", known=4, content="more", parts=(TextPart("more"),), title="more")
        assert ticket.compaction is None
        await store.end_turn(
            ticket, content="ok", reasoning="", stop_reason="end_turn", outcome="complete", usage=ContextUsage(7, 8)
        )
        await store.record_compaction("alpha", Compaction(4, "what happened"))
    async with SqliteSessionStore(old_db) as store:
        snapshot = await store.read_session("alpha")
        assert snapshot is not None
        assert snapshot.messages[:4] == _ALPHA and snapshot.messages[5].usage == ContextUsage(7, 8)
        assert snapshot.compaction == Compaction(4, "what happened")
        beta = await store.read_session("beta")
        assert beta is not None and beta.compaction is None
