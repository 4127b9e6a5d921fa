"""PostgreSQL: the store outlives its connections. After a restart of the server, or its backends ended
(``pg_terminate_backend``: a pooler's or firewall's cut, a failover), the next call runs on a new connection (its
prepared statements made again); the lock connection re-takes the locks of the sessions it held; a call fails
``store_io_error`` only while the server cannot be reached, and says so; ``health`` tells the truth throughout.

A cluster of this module's own (it is stopped and started here)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from acp_server.domain import TextPart
from acp_server.store import SessionBusyError, StoreIOError
from acp_server.store._postgres import PostgresSessionStore
from tests._postgres import Cluster
from tests.store._restarts import cluster, dsn, end_backends

__all__ = ["cluster", "dsn"]  # fixtures

pytestmark = pytest.mark.anyio

PARTS = (TextPart("q"),)


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[PostgresSessionStore]:
    async with PostgresSessionStore(dsn) as opened:
        yield opened


def data_backend(store: PostgresSessionStore) -> int:
    conn = store._pg
    assert conn is not None
    return conn.info.backend_pid


async def a_turn(store: PostgresSessionStore, session_id: str, known: int) -> None:
    ticket = await store.begin_turn(session_id, known=known, content="q", parts=PARTS, title="q")
    await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")


async def test_a_call_after_its_connection_was_ended_runs_on_a_new_one_with_its_statements_prepared_again(
    store: PostgresSessionStore, cluster: Cluster
) -> None:
    await store.create_session("s", "/w")
    await a_turn(store, "s", 0)  # its statements prepared on this connection
    before = data_backend(store)
    end_backends(cluster, "pid = %s", before)
    await a_turn(store, "s", 2)  # the same statements, prepared again on the new connection
    assert data_backend(store) != before
    snapshot = await store.read_session("s")
    assert snapshot is not None and [m.outcome for m in snapshot.messages] == ["complete"] * 4
    assert await store.health() is None


async def test_a_connection_lost_under_a_call_that_wrote_nothing_runs_it_again_once(
    store: PostgresSessionStore, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss is not seen before the call (a backend ended just as it was sent): the call meets it, and is run
    again on a new connection because no COMMIT of it was sent."""
    await store.create_session("s", "/w")
    # blind to the goodbye: the loss is met by the call itself
    monkeypatch.setattr("acp_server.store._pg_link._lost", lambda conn: conn.closed or conn.broken)
    end_backends(cluster, "pid = %s", data_backend(store))
    await store.set_title("s", "kept")  # its UPDATE's row count is read before its COMMIT is sent
    record = await store.get_session("s")
    assert record is not None and record.title == "kept"


async def test_the_lock_connection_ended_re_takes_the_locks_of_its_sessions(
    store: PostgresSessionStore, cluster: Cluster, dsn: str
) -> None:
    await store.create_session("s1", "/w")
    await store.claim("s1")
    end_backends(cluster, "application_name = %s", store.instance)
    assert await store.health() is None  # made again: the locks re-taken first thing
    async with PostgresSessionStore(dsn) as other:
        with pytest.raises(SessionBusyError) as busy:
            await other.claim("s1")
        assert busy.value.instance == store.instance
        await other.create_session("s2", "/w")
        await other.claim("s2")  # new sessions are attached as before
    await a_turn(store, "s1", 0)


async def test_a_session_taken_by_another_process_while_the_lock_was_lost_is_busy_here_until_it_lets_go(
    store: PostgresSessionStore, cluster: Cluster, dsn: str
) -> None:
    await store.create_session("s1", "/w")
    await store.create_session("s2", "/w")
    await store.claim("s1")
    await store.claim("s2")
    end_backends(cluster, "application_name = %s", store.instance)
    async with PostgresSessionStore(dsn) as other:
        await other.claim("s1")  # free: its lock went with the lost connection, and this one came first
        with pytest.raises(SessionBusyError) as busy:
            await store.begin_turn("s1", known=0, content="q", parts=PARTS, title="q")
        assert busy.value.instance == other.instance
        await a_turn(store, "s2", 0)  # re-taken
        await a_turn(other, "s1", 0)
        await other.release("s1")
        await a_turn(store, "s1", 2)  # taken back once the other let it go
        with pytest.raises(SessionBusyError):
            await other.claim("s1")


async def test_a_restart_fails_calls_as_unreachable_while_it_lasts_and_health_turns_ok_again(
    store: PostgresSessionStore, cluster: Cluster, dsn: str
) -> None:
    await store.create_session("s", "/w")
    await store.claim("s")
    await a_turn(store, "s", 0)
    cluster.stop()
    try:
        problem = await store.health()
        assert isinstance(problem, StoreIOError) and "cannot be reached" in str(problem)
        with pytest.raises(StoreIOError, match="the database cannot be reached"):
            await store.get_session("s")
        with pytest.raises(StoreIOError, match="the database cannot be reached"):
            await store.create_session("t", "/w")
    finally:
        cluster.start()
    assert await store.health() is None  # its backoff waited out, then one attempt: reached
    await a_turn(store, "s", 2)
    await store.create_session("t", "/w")
    await store.claim("t")
    async with PostgresSessionStore(dsn) as other:
        with pytest.raises(SessionBusyError):
            await other.claim("s")  # re-taken after the restart


async def test_a_turn_cut_by_the_outage_is_stored_interrupted_never_half_written(
    store: PostgresSessionStore, cluster: Cluster
) -> None:
    await store.create_session("s", "/w")
    ticket = await store.begin_turn("s", known=0, content="q", parts=PARTS, title="q")
    cluster.stop()
    try:
        with pytest.raises(StoreIOError):
            await store.end_turn(ticket, content="half", reasoning="", stop_reason="end_turn", outcome="complete")
    finally:
        cluster.start()
    snapshot = await store.read_session("s")
    assert snapshot is not None
    answer = snapshot.messages[-1]
    assert (answer.role, answer.outcome, answer.content) == ("assistant", "interrupted", "")
    await a_turn(store, "s", 2)
    snapshot = await store.read_session("s")
    assert snapshot is not None and [m.outcome for m in snapshot.messages] == [
        "complete", "interrupted", "complete", "complete"
    ]


async def test_both_connections_find_a_silent_cut_by_tcp_keepalives_unless_the_url_sets_its_own(dsn: str) -> None:
    async with PostgresSessionStore(f"{dsn}&keepalives_idle=5") as store:
        await store.health()
        lock = store._owners._link.current
        assert store._pg is not None and lock is not None
        for conn in (store._pg, lock):
            given = conn.info.get_parameters()
            assert (given["keepalives_idle"], given["keepalives_count"], given["tcp_user_timeout"]) == (
                "5", "3", "30000"
            )
