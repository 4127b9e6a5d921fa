"""A database made by the version 4 code (``data/v4.sqlite3``, see ``data/make_v4.py``) upgrades in place to version
5: everything reads as before (no usage, no compaction), the killed turn's journaled steps included, and the
upgraded sessions take compactions and usage from then on."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.domain import Compaction, ContextUsage, TextPart
from acp_server.store import SCHEMA_VERSION, SqliteSessionStore

from ._migrations import check_old, check_upgraded, old_copy, read_as_before
from .test_migration_v2 import _ALPHA
from .test_migration_v3 import EXPECTED  # the same sessions, made again by the version 4 code

pytestmark = pytest.mark.anyio


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return old_copy(4, tmp_path)


def test_the_fixture_is_a_version_4_database_of_ours(old_db: Path) -> None:
    names = check_old(old_db, 4, ("SELECT count(*) FROM answer_calls", (2,)))  # the killed turn's journal
    assert "compactions" not in names.tables
    assert SCHEMA_VERSION >= 5  # version 6 has its own fixture, made by the version 5 code (data/make_v5.py)


async def test_a_version_4_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        for record, snapshot in await read_as_before(store, EXPECTED):
            assert snapshot.record == record and snapshot.compaction is None
    assert "compactions" in check_upgraded(old_db).tables


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
