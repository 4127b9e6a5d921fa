"""A database made by the version 3 code (``data/v3.sqlite3``, see ``data/make_v3.py``) upgrades in place to version
4: everything reads as before — the killed turn's steps, recorded in its answer row by that code, included — and
the next turn on that session closes the old answer with those steps, while its own calls go to the journal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.domain import ModelStep, TextPart
from acp_server.store import SCHEMA_VERSION, SqliteSessionStore, StoredMessage

from ._migrations import check_old, check_upgraded, old_copy, read_as_before
from .test_migration_v2 import _ALPHA, READ, STEP  # what the version 2 file held, made again by the version 3 code

pytestmark = pytest.mark.anyio

_LOST = StoredMessage(2, "assistant", "", outcome="interrupted", steps=(STEP,))
_DELTA = (StoredMessage(1, "user", "lost", parts=(TextPart("lost"),)), _LOST)
EXPECTED = {  # newest first: (cwd, title, mode, model, history)
    "delta": ("/work/project", "lost", None, None, _DELTA),
    "gamma": ("/work/empty", "", None, None, ()),
    "beta": ("/work/fork", "Fix a.py", "accept-edits", "gpt-4o", _ALPHA),
    "alpha": ("/work/project", "Fix a.py", "read-only", "gpt-4o", _ALPHA),
}


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    """A copy of the version 3 file."""
    return old_copy(3, tmp_path)


def test_the_fixture_is_a_version_3_database_of_ours(old_db: Path) -> None:
    assert "answer_calls" not in check_old(old_db, 3).tables
    with sqlite3.connect(old_db) as raw:
        pending = raw.execute("SELECT steps FROM messages WHERE outcome = 'pending'").fetchall()
        assert len(pending) == 1 and pending[0][0] is not None  # that code wrote a running answer's steps there
    raw.close()
    assert SCHEMA_VERSION >= 4  # version 5 has its own fixture, made by the version 4 code (data/make_v4.py)


async def test_a_version_3_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        for record, snapshot in await read_as_before(store, EXPECTED):
            assert snapshot.record == record
    assert "answer_calls" in check_upgraded(old_db).tables
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("SELECT count(*) FROM answer_calls").fetchone() == (0,)
    raw.close()


async def test_the_next_turn_closes_the_old_answer_with_its_steps_and_journals_its_own(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        ticket = await store.begin_turn("delta", known=0, content="again", parts=(TextPart("again"),), title="again")
        assert [m.seq for m in ticket.catch_up] == [1, 2] and ticket.catch_up[1] == _LOST
        await store.record_steps(ticket, (ModelStep("", "", (READ,)),))
        with sqlite3.connect(old_db) as raw:
            assert raw.execute("SELECT seq, n FROM answer_calls").fetchall() == [(4, 0)]
            assert raw.execute("SELECT outcome FROM messages WHERE session_id = 'delta' AND seq = 2").fetchone() == (
                "interrupted",
            )
        raw.close()
        await store.end_turn(ticket, content="ok", reasoning="", stop_reason="end_turn", outcome="complete")
        snapshot = await store.read_session("delta")
        assert snapshot is not None and snapshot.messages[1] == _LOST
        assert snapshot.messages[3] == StoredMessage(4, "assistant", "ok", stop_reason="end_turn")
