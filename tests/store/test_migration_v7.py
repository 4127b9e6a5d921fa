"""A database made by the version 7 code (``data/v7.sqlite3``, see ``data/make_v7.py``) upgrades in place to version
8: everything reads as before, with no client system prompt, and the upgraded sessions store theirs from then on."""

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
    return old_copy(7, tmp_path)


def test_the_fixture_is_a_version_7_database_of_ours(old_db: Path) -> None:
    assert "system_prompt" not in check_old(old_db, 7).session_columns
    assert SCHEMA_VERSION >= 8  # version 9 has its own fixture, made by the version 8 code (data/make_v8.py)


async def test_a_version_7_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        for record, _ in await read_as_before(store, EXPECTED):
            assert record.system_prompt is None
        alpha = await store.read_session("alpha")
        assert alpha is not None and alpha.record.additional_directories == ("/work/lib",)
        assert alpha.rewinds == (Rewind(3, 4),)
    assert "system_prompt" in check_upgraded(old_db).session_columns


async def test_an_upgraded_session_stores_its_client_prompt_and_reads_it_after_a_reopen(old_db: Path) -> None:
    prompt = ClientPrompt("override", "You review code; never edit.")
    async with SqliteSessionStore(old_db) as store:
        await store.set_system_prompt("alpha", prompt)
    async with SqliteSessionStore(old_db) as store:
        alpha = await store.get_session("alpha")
        assert alpha is not None and alpha.system_prompt == prompt
        listed = {record.session_id: record.system_prompt for record in (await store.list_sessions()).sessions}
        assert listed["alpha"] == prompt and listed["gamma"] is None
        await store.set_system_prompt("alpha", None)
        alpha = await store.get_session("alpha")
        assert alpha is not None and alpha.system_prompt is None
