"""PostgreSQL: the store's statements are queued and sent together when a result is needed and at the commit, so a
turn's writes take three round trips (two to begin it, one to end it) whatever its history; a batch that failed
wrote nothing and leaves the connection usable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from acp_server.domain import ModelStep, TextPart, ToolCallRecord
from acp_server.store._postgres import PostgresSessionStore, _Dialect, _Prepared
from acp_server.store._schema import write

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PostgresSessionStore]:
    async with PostgresSessionStore(pg_dsn) as opened:
        yield opened


def _sent(store: PostgresSessionStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every query the store's connection sends from now on (one each round trip)."""
    sent: list[str] = []
    conn = store._pg
    assert conn is not None
    real = conn.execute

    def execute(query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return real(query, *args, **kwargs)

    monkeypatch.setattr(conn, "execute", execute)
    return sent


async def test_a_turn_takes_two_round_trips_to_begin_and_one_to_end(
    store: PostgresSessionStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create_session("s", "/w")
    sent = _sent(store, monkeypatch)
    for turn in range(3):  # the first prepares the statements in the same round trips
        del sent[:]
        ticket = await store.begin_turn("s", known=2 * turn, content="q", parts=(TextPart("q"),), title="q")
        assert len(sent) == 2
        await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")
        assert len(sent) == 3
    call = ToolCallRecord("c1", "read_file", "{}", "out", "completed", "Read", "read")
    ticket = await store.begin_turn("s", known=6, content="q", parts=(TextPart("q"),), title="q")
    steps = (ModelStep("", "", (call,)),)
    await store.record_steps(ticket, steps)
    del sent[:]
    await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete", steps=steps)
    assert len(sent) == 1
    snapshot = await store.read_session("s")
    assert snapshot is not None and len(snapshot.messages) == 8
    assert (snapshot.messages[-1].outcome, snapshot.messages[-1].steps) == ("complete", steps)
    with psycopg.connect(pg_dsn) as conn:  # its journal removed in the same round trip
        assert conn.execute("SELECT count(*) FROM answer_calls").fetchone() == (0,)


async def test_a_failed_batch_writes_nothing_and_a_statement_first_queued_after_the_failure_works_next_time(
    pg_dsn: str,
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        dialect = _Dialect(conn, _Prepared())
        with pytest.raises(psycopg.errors.UniqueViolation), write(dialect):  # type: ignore[arg-type]
            dialect.execute("INSERT INTO t VALUES (?)", (1,))
            dialect.execute("INSERT INTO t VALUES (?)", (1,))  # fails when the commit sends the batch
            dialect.execute("SELECT count(*) FROM t WHERE id > ?", (0,))  # its PREPARE never ran
        assert dialect.in_transaction
        dialect.execute("ROLLBACK")  # as the store's call does after a failed commit
        with write(dialect):  # type: ignore[arg-type]
            count = dialect.execute("SELECT count(*) FROM t WHERE id > ?", (0,)).fetchone()
        assert count == (0,)


async def test_a_nul_in_a_prompt_or_an_answer_is_stored_as_u_fffd_and_every_later_turn_works(
    store: PostgresSessionStore,
) -> None:
    await store.create_session("s", "/w")  # the turn's statements are first used (and prepared) by a NUL prompt
    ticket = await store.begin_turn("s", known=0, content="a\x00b", parts=(TextPart("a\x00b"),), title="t\x00")
    await store.end_turn(ticket, content="bad\x00", reasoning="\x00", stop_reason="end_turn", outcome="complete")
    ticket = await store.begin_turn("s", known=2, content="ok", parts=(TextPart("ok"),), title="ok")
    await store.end_turn(ticket, content="fine", reasoning="", stop_reason="end_turn", outcome="complete")
    snapshot = await store.read_session("s")
    assert snapshot is not None
    assert [m.content for m in snapshot.messages] == ["a\ufffdb", "bad\ufffd", "ok", "fine"]
    assert snapshot.record.title == "t\ufffd"


async def test_a_statement_whose_prepare_was_rolled_back_unsent_or_whose_values_could_not_be_bound_works_next_time(
    pg_dsn: str,
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        dialect = _Dialect(conn, _Prepared())
        dialect.execute("BEGIN IMMEDIATE")
        dialect.execute("INSERT INTO t VALUES (?)", (1,))  # its PREPARE queued, never sent
        dialect.execute("ROLLBACK")  # as the store does when its own code fails before the commit
        with pytest.raises(psycopg.ProgrammingError), write(dialect):  # type: ignore[arg-type]
            dialect.execute("SELECT count(*) FROM t WHERE id > ?", (object(),))  # cannot be bound
        dialect.execute("ROLLBACK")
        with write(dialect):  # type: ignore[arg-type]
            dialect.execute("INSERT INTO t VALUES (?)", (2,))
            count = dialect.execute("SELECT count(*) FROM t WHERE id > ?", (0,)).fetchone()
        assert count == (1,)
