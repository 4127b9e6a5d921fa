"""What every migration test checks of a database the code before made (``data/vN.sqlite3``, see ``data/make_vN.py``):
that the copy is one of ours at that version, that the upgraded file is whole at the current version, and that its
sessions read as before."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from acp_server.store import SCHEMA_VERSION, SessionRecord, SessionSnapshot, SqliteSessionStore, _sqlite

from ._support import copy_of

DATA = Path(__file__).parent / "data"


class Names(NamedTuple):
    """A file's tables and the columns of its ``sessions`` table."""

    tables: set[str]
    session_columns: set[str]


def old_copy(version: int, tmp_path: Path) -> Path:
    """A copy of the version ``version`` file, where a state directory would hold it."""
    return copy_of(DATA / f"v{version}.sqlite3", tmp_path)


def _names(raw: sqlite3.Connection) -> Names:
    tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return Names(tables, {row[1] for row in raw.execute("PRAGMA table_info(sessions)")})


def check_old(path: Path, version: int, *more: tuple[str, Any]) -> Names:
    """``path`` is a database of ours at ``version`` (and each SQL of ``more`` reads its one row); its names."""
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (version,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        for sql, row in more:
            assert raw.execute(sql).fetchone() == row, sql
        names = _names(raw)
    raw.close()
    return names


def check_upgraded(path: Path) -> Names:
    """``path`` is now at the current version and whole; its names."""
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        names = _names(raw)
    raw.close()
    return names


async def read_as_before(
    store: SqliteSessionStore, expected: Mapping[str, tuple[str, str, str | None, str | None, Any]]
) -> list[tuple[SessionRecord, SessionSnapshot]]:
    """The store opened the old file without a problem and lists ``expected``'s sessions (newest first) with their
    cwd, title, mode, model and history; each listed record with its snapshot."""
    assert store.problem is None
    page = await store.list_sessions()
    assert [r.session_id for r in page.sessions] == list(expected)
    found = []
    for record in page.sessions:
        cwd, title, mode, model, history = expected[record.session_id]
        assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, mode, model)
        snapshot = await store.read_session(record.session_id)
        assert snapshot is not None and snapshot.messages == history
        found.append((record, snapshot))
    return found
