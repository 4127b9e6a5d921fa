"""A database made by the version 6 code (``data/v6.sqlite3``, see ``data/make_v6.py``) upgrades in place to version
7: everything reads as before, with no rewinds, and the upgraded sessions store theirs from then on."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.store import SCHEMA_VERSION, Rewind, SqliteSessionStore

from ._migrations import check_old, check_upgraded, old_copy, read_as_before
from .test_migration_v3 import EXPECTED

pytestmark = pytest.mark.anyio


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return old_copy(6, tmp_path)


def test_the_fixture_is_a_version_6_database_of_ours(old_db: Path) -> None:
    assert "rewinds" not in check_old(old_db, 6).tables
    assert SCHEMA_VERSION >= 7  # version 8 has its own fixture, made by the version 7 code (data/make_v7.py)


async def test_a_version_6_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        for _, snapshot in await read_as_before(store, EXPECTED):
            assert snapshot.rewinds == ()
        alpha = await store.get_session("alpha")
        assert alpha is not None and alpha.additional_directories == ("/work/lib",)
    assert "rewinds" in check_upgraded(old_db).tables


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
