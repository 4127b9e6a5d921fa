"""A database made by the version 2 code (``data/v2.sqlite3``, see ``data/make_v2.py``) upgrades in place to version
3: sessions, modes, tool steps and the interrupted answer read exactly as before, with no model; the model can then be
set, and forks copy it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.domain import DiffContent, ModelStep, TextContent, TextPart, ToolCallRecord, ToolLocation
from acp_server.store import SCHEMA_VERSION, SqliteSessionStore, StoredMessage, _sqlite

from ._support import copy_of

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "v2.sqlite3"

READ = ToolCallRecord(
    call_id="c1",
    name="read_file",
    arguments='{"path": "a.py"}',
    output="1\tprint('café')\n",
    status="completed",
    title="Read a.py",
    kind="read",
    locations=(ToolLocation("/work/project/a.py", 1),),
    content=(TextContent("print('café')"),),
)
EDIT = ToolCallRecord(
    call_id="c2",
    name="edit_file",
    arguments='{"path": "a.py", "old_text": "café", "new_text": "tea"}',
    output="Edited /work/project/a.py",
    status="completed",
    title="Edit a.py",
    kind="edit",
    locations=(ToolLocation("/work/project/a.py"),),
    content=(DiffContent("/work/project/a.py", "print('café')\n", "print('tea')\n"),),
)
STEP = ModelStep("Let me look.", "Read first.", (READ, EDIT))
_ALPHA = (
    StoredMessage(1, "user", "Fix a.py", parts=(TextPart("Fix a.py"),)),
    StoredMessage(2, "assistant", "Done.", stop_reason="end_turn", steps=(STEP,)),
    StoredMessage(3, "user", "thanks", parts=(TextPart("thanks"),)),
    StoredMessage(4, "assistant", "You're welcome.", "r", stop_reason="end_turn"),
)
EXPECTED = {  # newest first: (cwd, title, mode, history)
    "delta": (
        "/work/project",
        "lost",
        None,
        (
            StoredMessage(1, "user", "lost", parts=(TextPart("lost"),)),
            StoredMessage(2, "assistant", "", outcome="interrupted", steps=(STEP,)),
        ),
    ),
    "gamma": ("/work/empty", "", None, ()),
    "beta": ("/work/fork", "Fix a.py", "accept-edits", _ALPHA),
    "alpha": ("/work/project", "Fix a.py", "read-only", _ALPHA),
}


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    """A copy of the version 2 file."""
    return copy_of(FIXTURE, tmp_path)


def _columns(raw: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in raw.execute(f"PRAGMA table_info({table})")]


def test_the_fixture_is_a_version_2_database_of_ours(old_db: Path) -> None:
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (2,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        assert _columns(raw, "sessions")[-1] == "mode" and "model" not in _columns(raw, "sessions")
        assert raw.execute("SELECT count(*) FROM messages WHERE outcome = 'pending'").fetchone() == (1,)


async def test_a_version_2_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is None
        page = await store.list_sessions()
        assert [r.session_id for r in page.sessions] == list(EXPECTED)
        for record in page.sessions:
            cwd, title, mode, history = EXPECTED[record.session_id]
            assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, mode, None)
            snapshot = await store.read_session(record.session_id)
            assert snapshot is not None and snapshot.record == record
            assert snapshot.messages == history
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert _columns(raw, "sessions")[-4:] == ["model", "additional_directories", "system_prompt", "task_of"]
        assert raw.execute("SELECT count(*) FROM sessions WHERE model IS NOT NULL").fetchone() == (0,)


async def test_models_are_stored_and_forked_on_an_upgraded_database(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        await store.set_model("alpha", "gpt-4o")
        child = await store.fork_session("alpha", "epsilon", cwd="/work/project")
        assert (child.mode, child.model, child.title) == ("read-only", "gpt-4o", "Fix a.py")
    async with SqliteSessionStore(old_db) as store:
        alpha = await store.get_session("alpha")
        beta = await store.get_session("beta")
        assert alpha is not None and (alpha.mode, alpha.model) == ("read-only", "gpt-4o")
        assert beta is not None and beta.model is None
        snapshot = await store.read_session("epsilon")
        assert snapshot is not None and snapshot.messages == _ALPHA
