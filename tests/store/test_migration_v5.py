"""A database made by the version 5 code (``data/v5.sqlite3``, see ``data/make_v5.py``) upgrades in place to version
6: everything reads as before, with no additional directories, and the upgraded sessions store theirs from then on."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.store import SCHEMA_VERSION, SqliteSessionStore

from ._migrations import check_old, check_upgraded, old_copy, read_as_before
from .test_migration_v3 import EXPECTED

pytestmark = pytest.mark.anyio


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return old_copy(5, tmp_path)


def test_the_fixture_is_a_version_5_database_of_ours(old_db: Path) -> None:
    assert "additional_directories" not in check_old(old_db, 5).session_columns
    assert SCHEMA_VERSION >= 6  # version 7 has its own fixture, made by the version 6 code (data/make_v6.py)


async def test_a_version_5_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        for record, snapshot in await read_as_before(store, EXPECTED):
            assert record.additional_directories == () and snapshot.record == record
    assert "additional_directories" in check_upgraded(old_db).session_columns


async def test_an_upgraded_session_stores_its_additional_directories(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        await store.set_additional_directories("alpha", ("/work/lib", "/work/docs"))
    async with SqliteSessionStore(old_db) as store:
        alpha = await store.get_session("alpha")
        beta = await store.get_session("beta")
        assert alpha is not None and alpha.additional_directories == ("/work/lib", "/work/docs")
        assert beta is not None and beta.additional_directories == ()
