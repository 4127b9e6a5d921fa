"""Session store costs: the per-turn write overhead, and ``session/load`` of a 1,000-message history.

Run: ``python bench/bench_store.py [--turns 500] [--runs 5] [--calls 200] [--postgres URL]``. Targets on this
machine: ≤ 2 ms of store writes per turn (median), ≤ 200 ms from sending ``session/load`` to the last replayed update
(median), a tool call's journal write that does not grow with the calls before it (the last call's within 2× the
first's), and PostgreSQL's figures at a 400-message history within 2× of SQLite's.

1. Per turn, a journaled session records the prompt (``begin_turn``: one transaction with a pending answer) and the
   answer (``end_turn``: one transaction), each in a worker thread. Measured through ``SessionEntry`` exactly as
   ``ModelTurn`` calls it, on a real file (WAL, synchronous=NORMAL), with a 1 KB answer and a growing history.
2. A real ``acp-server`` process over pipes, on a state directory holding a session of 1,000 messages (500 turns,
   each answer ~600 characters plus reasoning): the clock runs from writing the ``session/load`` line until the last
   ``session/update`` line is read (and until the reply). The first load in a process attaches the session (reads it
   into memory); a second load of the same session is reported too. Measured once the process has settled
   (``--settle`` seconds after ``initialize``: the agent imports the ACP schema models and the model client in a
   thread after answering ``initialize``, ~1.5 s of CPU on 2 cores) and, for comparison, right after ``initialize``
   and a first ``session/list``, while that import still competes for the CPU.
3. One turn of ``--calls`` tool calls (10 per model request, each with a 16 KiB output and its text content): the
   store time of ``record_steps`` after each call, exactly as ``ModelTurn`` calls it (all the steps so far), then
   the ``end_turn`` with every step.
4. The 400-message history (200 turns), SQLite on disk beside PostgreSQL: ``read_session`` of it (what attaching a
   session reads) and one more turn's writes (``begin_turn`` reads the history's tail, then ``end_turn``), median of
   ``--samples`` (each sample's turn stays: the history grows from 400 messages by two a sample). PostgreSQL is
   ``--postgres URL`` (an empty database: it is written to), else a throwaway cluster started like the tests'
   (Debian's initdb/pg_ctl, a unix socket, ``fsync=off`` as SQLite's ``synchronous=NORMAL`` does not sync each commit
   either); skipped with the reason when neither is available.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from acp_server.bridge import SessionBridge
from acp_server.domain import Message, ModelStep, Prompt, TextContent, TextPart, ToolCallRecord
from acp_server.store import SessionStore, SqliteSessionStore

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

ANSWER = ("The quick brown fox jumps over the lazy dog. " * 23)[:1000]


def _server_command(state_dir: Path) -> list[str]:
    """``acp-server --state-dir DIR``."""
    return [sys.executable, "-m", "acp_server", "--state-dir", str(state_dir), "--log-level", "WARNING"]


async def _never(*args: object) -> str:
    raise AssertionError


async def bench_turn_writes(directory: Path, turns: int) -> list[float]:
    """Seconds spent in the store per turn (begin_turn + end_turn), for ``turns`` consecutive turns."""
    samples: list[float] = []
    async with SqliteSessionStore(directory / "sessions.db") as store, SessionBridge(_never, store=store) as bridge:
        session = await bridge.open_session("/bench")
        for i in range(turns):
            text = f"question {i}: what does this function do?"
            prompt = Prompt((TextPart(text),))
            start = time.perf_counter()
            await session.begin_turn(prompt, Message("user", text))
            middle = time.perf_counter()
            answer = Message("assistant", ANSWER, "Reasoning about it.", "end_turn", "complete")
            resumed = time.perf_counter()
            await session.end_turn(answer)
            samples.append((middle - start) + (time.perf_counter() - resumed))
    return samples


async def bench_call_journal(directory: Path, calls: int) -> tuple[list[float], float]:
    """Seconds of each ``record_steps`` of one turn of ``calls`` calls, and of its ``end_turn``."""
    output = ("line of a file that the model read, with some code in it\n" * 300)[: 16 * 1024]
    samples: list[float] = []
    async with SqliteSessionStore(directory / "sessions.db") as store, SessionBridge(_never, store=store) as bridge:
        session = await bridge.open_session("/bench")
        await session.begin_turn(Prompt((TextPart("read them all"),)), Message("user", "read them all"))
        steps: list[ModelStep] = []
        current: list[ToolCallRecord] = []
        for i in range(calls):
            call = ToolCallRecord(
                f"call_{i}", "read_file", f'{{"path": "src/f{i}.py"}}', output, "completed", f"Read src/f{i}.py",
                "read", content=(TextContent(output),),
            )  # fmt: skip
            current.append(call)
            step = ModelStep("Let me look.", "", tuple(current))
            start = time.perf_counter()
            await session.record_steps((*steps, step))
            samples.append(time.perf_counter() - start)
            if len(current) == 10:
                steps.append(step)
                current = []
        start = time.perf_counter()
        await session.end_turn(Message("assistant", ANSWER, "", "end_turn", "complete", steps=tuple(steps)))
        return samples, time.perf_counter() - start


async def _populate(state_dir: Path, turns: int) -> str:
    async with SqliteSessionStore(state_dir / "sessions.db") as store:
        session_id = "bench-load-session"
        await store.create_session(session_id, "/bench")
        for i in range(turns):
            text = f"Question number {i}: please explain the code in module_{i}.py line by line."
            ticket = await store.begin_turn(session_id, known=2 * i, content=text, parts=(TextPart(text),), title=text)
            await store.end_turn(
                ticket,
                content=ANSWER[:600],
                reasoning="Let me look at the module first.",
                stop_reason="end_turn",
                outcome="complete",
            )
        return session_id


class _Server:
    def __init__(self, state_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
        self.process = subprocess.Popen(
            _server_command(state_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self._id = 0

    def send(self, method: str, params: dict[str, object]) -> int:
        assert self.process.stdin is not None
        self._id += 1
        line = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(line).encode() + b"\n")
        self.process.stdin.flush()
        return self._id

    def until_reply(self, msg_id: int) -> tuple[int, float, float]:
        """(updates seen, seconds to the last update, seconds to the reply) — clock started by the caller."""
        assert self.process.stdout is not None
        updates, last_update = 0, 0.0
        while True:
            message = json.loads(self.process.stdout.readline())
            if message.get("method") == "session/update":
                updates += 1
                last_update = time.perf_counter()
            elif message.get("id") == msg_id:
                assert "result" in message, message
                return updates, last_update, time.perf_counter()

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


def bench_load(state_dir: Path, session_id: str, settle_s: float) -> tuple[int, float, float, float]:
    """One fresh server: (updates, first load to last update, first load to reply, second load to last update)."""
    server = _Server(state_dir)
    try:
        server.until_reply(server.send("initialize", {"protocolVersion": 1}))
        server.until_reply(server.send("session/list", {}))  # waits for the schema models (as session/new would)
        time.sleep(settle_s)
        load = {"sessionId": session_id, "cwd": "/bench", "mcpServers": []}
        start = time.perf_counter()
        updates, last, reply = server.until_reply(server.send("session/load", load))
        first_last, first_reply = last - start, reply - start
        start = time.perf_counter()
        again, last, _ = server.until_reply(server.send("session/load", load))
        assert again == updates
        return updates, first_last, first_reply, last - start
    finally:
        server.close()


HISTORY_TURNS = 200  # 400 messages


async def bench_history(store: SessionStore, samples: int) -> tuple[float, float]:
    """Median seconds of ``read_session`` of a 400-message history, and of one more turn's two writes at it."""
    async with store:
        if store.problem is not None:
            raise SystemExit(f"cannot open {store.location}: {store.problem.detail}")
        session_id = "bench-history"
        await store.create_session(session_id, "/bench")
        for i in range(HISTORY_TURNS):
            text = f"Question number {i}: please explain the code in module_{i}.py line by line."
            ticket = await store.begin_turn(session_id, known=2 * i, content=text, parts=(TextPart(text),), title=text)
            await store.end_turn(
                ticket, content=ANSWER[:600], reasoning="Looking.", stop_reason="end_turn", outcome="complete"
            )
        reads: list[float] = []
        writes: list[float] = []
        for i in range(samples):
            known = 2 * (HISTORY_TURNS + i)
            start = time.perf_counter()
            snapshot = await store.read_session(session_id)
            reads.append(time.perf_counter() - start)
            assert snapshot is not None and len(snapshot.messages) == known
            start = time.perf_counter()
            ticket = await store.begin_turn(session_id, known=known, content="q", parts=(TextPart("q"),), title="q")
            await store.end_turn(ticket, content=ANSWER, reasoning="", stop_reason="end_turn", outcome="complete")
            writes.append(time.perf_counter() - start)
        return statistics.median(reads), statistics.median(writes)


def _postgres_store(url: str | None) -> tuple[SessionStore, object] | str:
    """The PostgreSQL store to measure and what keeps its cluster running, or why there is none."""
    from acp_server.store._postgres import PostgresSessionStore

    if url:
        return PostgresSessionStore(url), None
    from tests._postgres import find_bindir, throwaway_cluster

    bindir = find_bindir()
    if bindir is None:
        return "no --postgres URL and no Debian PostgreSQL (/usr/lib/postgresql/*/bin/initdb)"
    cluster = throwaway_cluster(bindir)
    return PostgresSessionStore(cluster.__enter__().dsn), cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=500, help="turns written in the write benchmark")
    parser.add_argument("--runs", type=int, default=5, help="server processes in the load benchmark")
    parser.add_argument("--settle", type=float, default=2.5, help="seconds between initialize and the timed load")
    parser.add_argument("--calls", type=int, default=200, help="tool calls in the journal benchmark's turn")
    parser.add_argument("--samples", type=int, default=20, help="samples of the 400-message history benchmark")
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--only-history", action="store_true", help="run only the 400-message history benchmark")
    args = parser.parse_args()
    print(
        f"command: python bench/bench_store.py --turns {args.turns} --runs {args.runs} --settle {args.settle} "
        f"--calls {args.calls} --samples {args.samples}"
        + (" --postgres URL" if args.postgres else "")
        + (" --only-history" if args.only_history else "")
    )
    print(
        "targets: per-turn writes median <= 2 ms; session/load <= 200 ms; journal last call within 2x the first; "
        "PostgreSQL within 2x of SQLite at a 400-message history"
    )
    bench_stores(args.postgres, args.samples)
    if args.only_history:
        return

    with tempfile.TemporaryDirectory() as tmp:
        samples = anyio.run(bench_turn_writes, Path(tmp), args.turns)
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(
        f"per-turn store writes ({args.turns} turns, 2 transactions each): median {statistics.median(ms):.3f} ms, "
        f"p95 {p95:.3f} ms, max {ms[-1]:.3f} ms  (target median <= 2 ms)"
    )

    with tempfile.TemporaryDirectory() as tmp:
        journal, end = anyio.run(bench_call_journal, Path(tmp), args.calls)
    ms = [s * 1000 for s in journal]
    first, last = statistics.median(ms[:10]), statistics.median(ms[-10:])
    print(
        f"tool-call journal, one turn of {args.calls} calls (16 KiB outputs): record_steps median of the first 10 "
        f"{first:.2f} ms, of the last 10 {last:.2f} ms, total {sum(ms):.0f} ms; end_turn {end * 1000:.1f} ms  "
        f"(target: last within 2x first): {'met' if last <= 2 * first else 'MISSED'}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        state_dir = Path(tmp)
        session_id = anyio.run(_populate, state_dir, 500)
        for label, settle in (("settled", args.settle), ("right after initialize", 0.0)):
            runs = [bench_load(state_dir, session_id, settle) for _ in range(args.runs)]
            first_last = statistics.median(r[1] for r in runs) * 1000
            first_reply = statistics.median(r[2] for r in runs) * 1000
            again_last = statistics.median(r[3] for r in runs) * 1000
            print(
                f"session/load of 1000 messages ({runs[0][0]} updates), {label}, median of {args.runs} processes: "
                f"last update {first_last:.0f} ms, reply {first_reply:.0f} ms; second load {again_last:.0f} ms"
                + ("  (target <= 200 ms)" if settle else "")
            )


def bench_stores(url: str | None, samples: int) -> None:
    """Part 4: SQLite and PostgreSQL at a 400-message history, and the ratio against the 2x target."""
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = anyio.run(bench_history, SqliteSessionStore(Path(tmp) / "sessions.db"), samples)
    found = _postgres_store(url)
    if isinstance(found, str):
        print(f"400-message history: PostgreSQL skipped ({found})")
        return
    store, cluster = found
    try:
        postgres = anyio.run(bench_history, store, samples)
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)  # type: ignore[attr-defined]
    for label, lite, pg in (("read_session", sqlite[0], postgres[0]), ("one turn's writes", sqlite[1], postgres[1])):
        ratio = pg / lite
        print(
            f"400-message history, {label}, median of {samples}: SQLite {lite * 1000:.2f} ms, PostgreSQL "
            f"{pg * 1000:.2f} ms ({ratio:.2f}x; target <= 2x: {'met' if ratio <= 2 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
