"""A database made by the version 7 code (``data/v7.sqlite3``, see ``data/make_v7.py``) upgrades in place to version
8: everything reads as before, with no client system prompt, and the upgraded sessions store theirs from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.store import SCHEMA_VERSION, Rewind, SqliteSessionStore, _sqlite
from acp_server.system_prompts import ClientPrompt

from ._support import copy_of
from .test_migration_v3 import EXPECTED

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "v7.sqlite3"


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return copy_of(FIXTURE, tmp_path)


def _columns(raw: sqlite3.Connection) -> set[str]:
    return {row[1] for row in raw.execute("PRAGMA table_info(sessions)")}


def test_the_fixture_is_a_version_7_database_of_ours(old_db: Path) -> None:
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (7,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        assert "system_prompt" not in _columns(raw)
    raw.close()
    assert SCHEMA_VERSION >= 8  # version 9 has its own fixture, made by the version 8 code (data/make_v8.py)


async def test_a_version_7_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is None
        page = await store.list_sessions()
        assert [r.session_id for r in page.sessions] == list(EXPECTED)
        for record in page.sessions:
            cwd, title, mode, model, history = EXPECTED[record.session_id]
            assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, mode, model)
            assert record.system_prompt is None
            snapshot = await store.read_session(record.session_id)
            assert snapshot is not None and snapshot.messages == history
        alpha = await store.read_session("alpha")
        assert alpha is not None and alpha.record.additional_directories == ("/work/lib",)
        assert alpha.rewinds == (Rewind(3, 4),)
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert "system_prompt" in _columns(raw)
    raw.close()


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
