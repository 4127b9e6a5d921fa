"""How ``v8.sqlite3`` was made: run with the store of schema version 8 (commit 83550ae) importable.

    PYTHONPATH=<a checkout of that commit> python tests/store/data/make_v8.py tests/store/data/v8.sqlite3

Four sessions, as in the version 4 file, made again by the version 8 code (which had no subagent children;
alpha has additional directories, a rewind and a client system prompt):
``alpha`` (an answer with tool steps, then one without; mode ``read-only``, model ``gpt-4o``), ``beta`` (a fork of
alpha, its mode ``accept-edits`` set after the fork), ``gamma`` (never prompted) and ``delta`` (its answer still
``pending`` with one step in its call journal, its process killed with SIGKILL, so it reads ``interrupted``).
"""

from __future__ import annotations

import signal
import sqlite3
import sys
from pathlib import Path

import anyio
from make_v2 import STEP, _killed_turn  # the same steps and killed turn as the version 2 file (this directory)

from acp_server.domain import TextPart
from acp_server.store import SCHEMA_VERSION, Rewind, SqliteSessionStore
from acp_server.system_prompts import ClientPrompt


async def _main(path: Path) -> None:
    assert SCHEMA_VERSION == 8, "this script documents the version 8 file; run it with that code"
    async with SqliteSessionStore(path) as store:
        await store.create_session("alpha", "/work/project")
        t = await store.begin_turn(
            "alpha", known=0, content="Fix a.py", parts=(TextPart("Fix a.py"),), title="Fix a.py"
        )
        await store.end_turn(
            t, content="Done.", reasoning="", stop_reason="end_turn", outcome="complete", steps=(STEP,)
        )
        t = await store.begin_turn("alpha", known=2, content="thanks", parts=(TextPart("thanks"),), title="thanks")
        await store.end_turn(t, content="You're welcome.", reasoning="r", stop_reason="end_turn", outcome="complete")
        await store.set_mode("alpha", "read-only")
        await store.set_model("alpha", "gpt-4o")
        await store.set_additional_directories("alpha", ("/work/lib",))
        await store.record_rewind("alpha", Rewind(3, 4))
        await store.set_system_prompt("alpha", ClientPrompt("append", "Be brief."))
        await store.fork_session("alpha", "beta", cwd="/work/fork")
        await store.set_mode("beta", "accept-edits")
        await store.create_session("gamma", "/work/empty")
        await store.create_session("delta", "/work/project")
    child = await anyio.run_process([sys.executable, __file__, "--kill", str(path)], check=False)
    assert child.returncode == -signal.SIGKILL, child.returncode
    with sqlite3.connect(path) as raw:  # fold the killed process's write-ahead log into the one file
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.close()


if __name__ == "__main__":
    if sys.argv[1] == "--kill":
        anyio.run(_killed_turn, Path(sys.argv[2]))
    else:
        target = Path(sys.argv[1])
        assert not target.exists(), f"{target} exists"
        anyio.run(_main, target)
