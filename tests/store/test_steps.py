"""Tool steps inside an answer and the session's mode: the JSON codec, and the store contract for both stores
(record while pending, end with the final steps, read, catch up, fork, refusals); then what a kill -9 of the
process running the tool loop leaves on disk."""

from __future__ import annotations

import dataclasses
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from acp_server.domain import DiffContent, ModelStep, TextPart, ToolCallRecord
from acp_server.store import (
    SessionStore,
    SqliteSessionStore,
    StoreBusyError,
    StoredSessionNotFoundError,
    StoreIOError,
    TurnTicket,
)
from acp_server.store._types import (
    journal_length,
    journal_rows,
    steps_from_json,
    steps_json_from_journal,
    steps_to_json,
)

from ._support import DECLINED, EDIT, FIRST, READ, RUN, SECOND

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def _begin(store: SessionStore, session_id: str = "s1", *, known: int = 0, text: str = "fix it") -> TurnTicket:
    return await store.begin_turn(session_id, known=known, content=text, parts=(TextPart(text),), title=text)


async def _answer(store: SessionStore, session_id: str = "s1", seq: int = 2) -> tuple[str, tuple[ModelStep, ...]]:
    snapshot = await store.read_session(session_id)
    assert snapshot is not None
    message = snapshot.messages[seq - 1]
    assert message.role == "assistant" and message.seq == seq
    return message.outcome, message.steps


# -- the codec -----------------------------------------------------------------------------------------------


def test_steps_round_trip_with_every_content_kind_and_location() -> None:
    steps = (FIRST, SECOND, ModelStep("no calls", "", ()))
    text = steps_to_json(steps)
    assert text is not None
    assert steps_from_json(text) == steps
    assert "café ☕" in text  # not escaped
    assert text == json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))  # compact
    assert steps_from_json(text)[1].calls[0].content[1] == DiffContent("/w/new.txt", None, "fresh\n")


def test_no_steps_is_no_json() -> None:
    assert steps_to_json(()) is None
    assert steps_from_json(None) == steps_from_json("") == ()


def test_the_reader_skips_what_a_newer_version_added() -> None:
    stored = json.loads(steps_to_json((ModelStep("t", "r", (RUN,)),)) or "")
    call = stored[0]["calls"][0]
    call["content"].insert(0, {"type": "image", "data": "aGk="})
    call["kind"] = "teleport"
    call["future"] = {"x": 1}
    stored[0]["elapsedMs"] = 12
    (step,) = steps_from_json(json.dumps(stored))
    (read,) = step.calls
    assert read.content == RUN.content  # the image it does not know is skipped, the rest kept in order
    assert read.kind == "other"
    assert (read.call_id, read.output, read.status, read.raw_output) == ("call_3", RUN.output, "failed", ["exit", 1])


def test_a_raw_output_json_cannot_hold_is_stored_as_text() -> None:
    odd = ToolCallRecord("c", "glob", "{}", "", "completed", "Glob", "search", raw_output={"when": Path("/w")})
    (step,) = steps_from_json(steps_to_json((ModelStep("", "", (odd,)),)))
    assert step.calls[0].raw_output == {"when": "/w"}


# -- the contract (both stores) ------------------------------------------------------------------------------


async def test_steps_are_recorded_while_pending_and_the_final_ones_written_at_the_end(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    ticket = await _begin(store)
    assert await _answer(store) == ("running", ())
    await store.record_steps(ticket, (FIRST,))
    assert await _answer(store) == ("running", (FIRST,))
    await store.record_steps(ticket, (FIRST, SECOND))  # the whole tuple so far replaces the last one
    assert await _answer(store) == ("running", (FIRST, SECOND))
    third = ModelStep("", "", (DECLINED,))
    await store.end_turn(
        ticket,
        content="Fixed.",
        reasoning="done",
        stop_reason="end_turn",
        outcome="complete",
        steps=(FIRST, SECOND, third),
    )
    snapshot = await store.read_session("s1")
    assert snapshot is not None
    answer = snapshot.messages[1]
    assert (answer.content, answer.outcome, answer.steps) == ("Fixed.", "complete", (FIRST, SECOND, third))
    assert answer.to_message().steps == (FIRST, SECOND, third)
    assert snapshot.messages[0].steps == ()


async def test_end_turn_steps_replace_the_recorded_ones(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    ticket = await _begin(store)
    await store.record_steps(ticket, (FIRST,))
    await store.end_turn(ticket, content="", reasoning="", stop_reason=None, outcome="failed")
    assert await _answer(store) == ("failed", ())


async def test_record_steps_on_an_answer_that_is_no_longer_pending_is_refused(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    ticket = await _begin(store)
    await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete", steps=(FIRST,))
    with pytest.raises(StoreIOError, match="no longer pending"):
        await store.record_steps(ticket, (FIRST, SECOND))
    assert await _answer(store) == ("complete", (FIRST,))

    lost = await _begin(store, known=2, text="again")
    await store.record_steps(lost, (SECOND,))
    store._live.discard(("s1", lost.answer_seq))  # its turn died; the next turn marks it interrupted
    await _begin(store, known=4, text="third")
    with pytest.raises(StoreIOError, match="no longer pending"):
        await store.record_steps(lost, (SECOND, FIRST))
    assert await _answer(store, seq=4) == ("interrupted", (SECOND,))


async def test_readers_get_the_steps_of_every_answer_pending_ones_included(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    done = await _begin(store, text="one")
    await store.end_turn(done, content="1", reasoning="", stop_reason="end_turn", outcome="complete", steps=(FIRST,))
    cut = await _begin(store, known=2, text="two")
    await store.record_steps(cut, (SECOND,))
    store._live.discard(("s1", cut.answer_seq))  # died mid tool loop

    nxt = await _begin(store, known=1, text="three")
    assert [(m.seq, m.outcome, m.steps) for m in nxt.catch_up] == [
        (2, "complete", (FIRST,)),
        (3, "complete", ()),
        (4, "interrupted", (SECOND,)),
    ]
    await store.record_steps(nxt, (FIRST, SECOND))
    assert await _answer(store, seq=6) == ("running", (FIRST, SECOND))


async def test_fork_copies_the_steps_and_the_mode(store: SessionStore) -> None:
    await store.create_session("src", "/w")
    await store.set_mode("src", "accept-edits")
    done = await _begin(store, "src", text="one")
    await store.end_turn(done, content="1", reasoning="", stop_reason="end_turn", outcome="complete", steps=(FIRST,))
    running = await _begin(store, "src", known=2, text="two")
    await store.record_steps(running, (SECOND,))

    child = await store.fork_session("src", "child", cwd="/elsewhere")
    assert child.mode == "accept-edits"
    assert await store.get_session("child") == child
    assert await _answer(store, "child") == ("complete", (FIRST,))
    assert await _answer(store, "child", 4) == ("interrupted", (SECOND,))

    await store.record_steps(running, (SECOND, FIRST))  # the source's turn goes on in the source only
    await store.set_mode("src", "read-only")
    assert await _answer(store, "child", 4) == ("interrupted", (SECOND,))
    record = await store.get_session("child")
    assert record is not None and record.mode == "accept-edits"


async def test_a_session_is_created_and_forked_with_the_mode_it_starts_in(store: SessionStore) -> None:
    created = await store.create_session("s1", "/w", mode="read-only")
    assert created.mode == "read-only"
    assert await store.get_session("s1") == created  # in the same row, from the start
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.record.mode == "read-only"
    child = await store.fork_session("s1", "child", cwd="/w", mode="accept-edits")
    assert child.mode == "accept-edits" and await store.get_session("child") == child
    source = await store.get_session("s1")
    assert source is not None and source.mode == "read-only"  # the source keeps its own
    inherited = await store.fork_session("s1", "grandchild", cwd="/w")  # no mode given: the source's
    assert inherited.mode == "read-only"


async def test_the_mode_is_stored_and_returned_by_every_reader(store: SessionStore) -> None:
    created = await store.create_session("s1", "/w")
    await store.create_session("s2", "/w")
    assert created.mode is None
    await store.set_mode("s1", "read-only")
    await store.set_mode("s1", "default")
    record = await store.get_session("s1")
    assert record is not None and record.mode == "default"
    assert record.updated_us == created.updated_us  # a setting, not activity: the list order stays
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.record.mode == "default"
    listed = {r.session_id: r.mode for r in (await store.list_sessions()).sessions}
    assert listed == {"s1": "default", "s2": None}
    with pytest.raises(StoredSessionNotFoundError):
        await store.set_mode("nope", "default")


# -- SQLite: another process, a kill -9 ----------------------------------------------------------------------

_TOOL_LOOP = """
import sys, anyio
from acp_server.store import SqliteSessionStore
from acp_server.domain import TextPart
from tests.store._support import FIRST

async def main() -> None:
    async with SqliteSessionStore(sys.argv[1]) as store:
        ticket = await store.begin_turn("s1", known=0, content="fix", parts=(TextPart("fix"),), title="fix")
        await store.record_steps(ticket, (FIRST,))  # the first tool call ended; the next one "runs"
        print("recorded", flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


async def test_a_kill_mid_tool_loop_keeps_the_recorded_steps_and_reads_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await store.create_session("s1", "/w")
        process = await anyio.open_process(
            [sys.executable, "-c", _TOOL_LOOP, str(path)], cwd=ROOT, stdin=subprocess.DEVNULL
        )
        try:
            assert process.stdout is not None
            said = b""
            while not said.endswith(b"\n"):
                said += await process.stdout.receive()
            assert said == b"recorded\n"
            assert await _answer(store) == ("running", (FIRST,))  # another live process's turn, steps so far
        finally:
            process.send_signal(signal.SIGKILL)
            await process.wait()
        assert process.returncode == -signal.SIGKILL
        assert await _answer(store) == ("interrupted", (FIRST,))
        nxt = await _begin(store, known=0, text="again")  # takes the dead turn over
        assert [(m.outcome, m.steps) for m in nxt.catch_up] == [("complete", ()), ("interrupted", (FIRST,))]
        await store.end_turn(
            nxt, content="ok", reasoning="", stop_reason="end_turn", outcome="complete", steps=(SECOND,)
        )
    async with SqliteSessionStore(path) as reopened:
        assert await _answer(reopened) == ("interrupted", (FIRST,))
        assert await _answer(reopened, seq=4) == ("complete", (SECOND,))


async def test_a_closed_store_that_never_ended_its_turn_leaves_the_steps_to_the_next_owner(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = SqliteSessionStore(path)
    store.owner = "some-host-that-is-not-this-one|1|1|dead"  # as a process that is gone would look
    async with store:
        await store.create_session("s1", "/w")
        ticket = await _begin(store)
        await store.record_steps(ticket, (FIRST, SECOND))
    async with SqliteSessionStore(path) as other:
        assert other.owner != store.owner
        assert await _answer(other) == ("interrupted", (FIRST, SECOND))


async def test_record_steps_after_another_process_took_the_turn_over_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as a, SqliteSessionStore(path) as b:
        a.owner = "some-host-that-is-not-this-one|1|1|dead"
        await a.create_session("s1", "/w")
        ticket = await _begin(a)
        await a.record_steps(ticket, (FIRST,))
        await _begin(b, known=0, text="next")  # a looks dead: b marks its answer interrupted
        with pytest.raises(StoreIOError, match="taken over"):
            await a.record_steps(ticket, (FIRST, SECOND))
        with pytest.raises(StoreIOError, match="taken over"):
            await a.end_turn(ticket, content="late", reasoning="", stop_reason="end_turn", outcome="complete")
        assert await _answer(b) == ("interrupted", (FIRST,))
    with sqlite3.connect(path) as raw:  # the refused end_turn touched nothing, the session's time included
        (updated,) = raw.execute("SELECT updated_us FROM sessions WHERE id = 's1'").fetchone()
        (last,) = raw.execute("SELECT max(updated_us) FROM messages WHERE session_id = 's1'").fetchone()
        assert updated == last


async def test_record_steps_after_a_failed_end_turn_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path, busy_timeout_ms=50) as store:
        await store.create_session("s1", "/w")
        ticket = await _begin(store)
        await store.record_steps(ticket, (FIRST,))
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock past busy_timeout
        try:
            with pytest.raises(StoreBusyError):
                await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        with pytest.raises(StoreIOError, match="no longer pending"):  # the turn is over, though still pending
            await store.record_steps(ticket, (FIRST, SECOND))
        assert await _answer(store) == ("interrupted", (FIRST,))


def _journal(path: Path) -> list[tuple[int, int, int, str | None, str | None]]:
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT rowid, n, step, head, call FROM answer_calls ORDER BY seq, n").fetchall()
    raw.close()
    return rows


async def test_a_pending_answer_journals_one_row_per_call_and_its_end_folds_them_into_compact_json(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await store.create_session("s1", "/w")
        ticket = await _begin(store)
        await store.record_steps(ticket, (ModelStep("", "", (READ,)),))
        await store.record_steps(ticket, (ModelStep("", "", (READ, EDIT)),))
        first = _journal(path)[0]
        await store.record_steps(ticket, (ModelStep("", "", (READ, EDIT, RUN)),))
        rows = _journal(path)
        assert rows[0] == first  # not written again (only the last row is, and the new one): each call costs its size
        shape = [(n, step, head is not None) for _, n, step, head, _ in rows]
        assert shape == [(0, 0, True), (1, 0, False), (2, 0, False)]
        assert json.loads(rows[1][4] or "")["name"] == "edit_file"
        with sqlite3.connect(path) as raw:
            assert raw.execute("SELECT steps FROM messages WHERE seq = 2").fetchone() == (None,)
        raw.close()
        assert await _answer(store) == ("running", (ModelStep("", "", (READ, EDIT, RUN)),))
        await store.end_turn(
            ticket, content="ok", reasoning="", stop_reason="end_turn", outcome="complete", steps=(FIRST, SECOND)
        )
    assert _journal(path) == []  # folded into the answer by its end, in the same transaction
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT seq, outcome, steps FROM messages ORDER BY seq").fetchall()
    raw.close()
    assert [(seq, outcome) for seq, outcome, _ in rows] == [(1, "complete"), (2, "complete")]
    assert rows[0][2] is None
    assert rows[1][2] == steps_to_json((FIRST, SECOND))
    assert json.loads(rows[1][2])[0]["calls"][0]["locations"] == [{"path": "/w/src/app.py", "line": 3}]


def test_the_journal_codec_gives_the_answer_json_of_the_same_steps() -> None:
    steps = (FIRST, ModelStep("thinking aloud", "", ()), SECOND)
    rows = journal_rows(steps, 0)
    assert len(rows) == journal_length(steps) == 5  # a step without calls still has its row
    assert steps_json_from_journal(rows) == steps_to_json(steps)
    assert journal_rows(steps, 3) == rows[3:]  # only what is not written yet is encoded
    assert steps_json_from_journal([]) is None


async def test_a_change_to_the_last_journaled_call_reaches_the_journal(tmp_path: Path) -> None:
    # The turn appends a note to its last call when it dropped calls over the limit, after that call was recorded;
    # and a step recorded before its first call ended gets that call later.
    path = tmp_path / "sessions.db"
    noted = dataclasses.replace(EDIT, output=EDIT.output + "\n\n(only the first 2 ran)")
    async with SqliteSessionStore(path) as store:
        await store.create_session("s1", "/w")
        ticket = await _begin(store)
        await store.record_steps(ticket, (ModelStep("", "", (READ, EDIT)),))
        await store.record_steps(ticket, (ModelStep("", "", (READ, noted)), ModelStep("thinking", "", ())))
        await store.record_steps(ticket, (ModelStep("", "", (READ, noted)), ModelStep("thinking", "", (RUN,))))
        expected = (ModelStep("", "", (READ, noted)), ModelStep("thinking", "", (RUN,)))
        assert await _answer(store) == ("running", expected)
        assert [n for _, n, *_ in _journal(path)] == [0, 1, 2]


async def test_steps_that_do_not_continue_the_journal_replace_it(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await store.create_session("s1", "/w")
        ticket = await _begin(store)
        await store.record_steps(ticket, (FIRST, SECOND))
        await store.record_steps(ticket, (SECOND,))  # fewer calls than written: not a continuation
        assert await _answer(store) == ("running", (SECOND,))
        assert [n for _, n, *_ in _journal(path)] == [0, 1, 2]


async def test_a_fork_of_a_session_mid_tool_loop_copies_the_journaled_steps_as_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await store.create_session("s1", "/w")
        ticket = await _begin(store)
        await store.record_steps(ticket, (FIRST, SECOND))
        await store.fork_session("s1", "s2", cwd="/w")
        assert await _answer(store, "s2") == ("interrupted", (FIRST, SECOND))
        await store.record_steps(ticket, (FIRST, SECOND, FIRST))  # the source's turn goes on; the fork keeps its copy
        assert await _answer(store, "s2") == ("interrupted", (FIRST, SECOND))
        assert await _answer(store) == ("running", (FIRST, SECOND, FIRST))
