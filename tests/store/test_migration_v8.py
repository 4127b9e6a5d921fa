"""A database made by the version 8 code (``data/v8.sqlite3``, see ``data/make_v8.py``) upgrades in place to version
9: everything reads as before, every session its own (none a subagent child), and children are stored from then on."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.store import SCHEMA_VERSION, Rewind, SqliteSessionStore
from acp_server.system_prompts import ClientPrompt

from ._migrations import check_old, check_upgraded, old_copy, read_as_before
from .test_migration_v3 import EXPECTED

pytestmark = pytest.mark.anyio


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return old_copy(8, tmp_path)


def test_the_fixture_is_a_version_8_database_of_ours(old_db: Path) -> None:
    assert "task_of" not in check_old(old_db, 8).session_columns
    assert SCHEMA_VERSION == 9  # a new version needs its own fixture made by the code before it (data/make_v8.py)


async def test_a_version_8_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        for record, _ in await read_as_before(store, EXPECTED):
            assert record.task_of is None and await store.list_children(record.session_id) == ()
        alpha = await store.read_session("alpha")
        assert alpha is not None and alpha.record.additional_directories == ("/work/lib",)
        assert alpha.rewinds == (Rewind(3, 4),) and alpha.record.system_prompt == ClientPrompt("append", "Be brief.")
    assert "task_of" in check_upgraded(old_db).session_columns


async def test_an_upgraded_session_gets_children_listed_only_under_it_and_deleted_with_it(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        await store.create_session("kid", "/work/project", mode="read-only", task_of="alpha")
    async with SqliteSessionStore(old_db) as store:
        assert [r.session_id for r in await store.list_children("alpha")] == ["kid"]
        assert "kid" not in {r.session_id for r in (await store.list_sessions()).sessions}
        await store.delete_session("alpha")
        assert await store.get_session("kid") is None
        beta = await store.read_session("beta")  # a fork of alpha keeps its own copy, as before
        assert beta is not None and len(beta.messages) == 4
