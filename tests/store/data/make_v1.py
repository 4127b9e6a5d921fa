"""How ``v1.sqlite3`` was made: run with the store of schema version 1 (commit 82df898) importable.

    PYTHONPATH=<a checkout of that commit> python tests/store/data/make_v1.py tests/store/data/v1.sqlite3

Four sessions: ``alpha`` (complete, failed and cancelled answers), ``beta`` (an answer whose process was killed,
taken over and stored ``interrupted`` by the next turn), ``gamma`` (a fork of alpha) and ``delta`` (its last answer
still ``pending``, its process killed with SIGKILL, so it reads ``interrupted``).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio

from acp_server.domain import ResourceLinkPart, TextPart
from acp_server.store import SCHEMA_VERSION, SqliteSessionStore


async def _killed_turn(path: Path, session_id: str, known: int, text: str) -> None:
    """Begin a turn, then die by SIGKILL before ending it (the answer stays pending)."""
    async with SqliteSessionStore(path) as store:
        await store.begin_turn(session_id, known=known, content=text, parts=(TextPart(text),), title=text)
        os.kill(os.getpid(), signal.SIGKILL)


async def _main(path: Path) -> None:
    assert SCHEMA_VERSION == 1, "this script documents the version 1 file; run it with that code"
    async with SqliteSessionStore(path) as store:
        await store.create_session("alpha", "/work/project")
        parts = (TextPart("Explain café ☕"), ResourceLinkPart("file:///work/project/a.py", "a.py", "the module"))
        t = await store.begin_turn("alpha", known=0, content="Explain café ☕", parts=parts, title="Explain café ☕")
        await store.end_turn(
            t, content="It is a drink.", reasoning="Think.", stop_reason="end_turn", outcome="complete"
        )
        t = await store.begin_turn("alpha", known=2, content="more", parts=(TextPart("more"),), title="more")
        await store.end_turn(t, content="half", reasoning="", stop_reason=None, outcome="failed")
        t = await store.begin_turn("alpha", known=4, content="stop", parts=(TextPart("stop"),), title="stop")
        await store.end_turn(t, content="cut", reasoning="r", stop_reason="cancelled", outcome="cancelled")

        await store.create_session("beta", "/work/other")
        t = await store.begin_turn("beta", known=0, content="one", parts=(TextPart("one"),), title="one")
        await store.end_turn(t, content="1", reasoning="", stop_reason="end_turn", outcome="complete")
        await store.create_session("delta", "/work/other")
    for session_id, known, text in (("beta", 2, "two"), ("delta", 0, "lost")):
        child = await anyio.run_process(
            [sys.executable, __file__, "--kill", str(path), session_id, str(known), text], check=False
        )
        assert child.returncode == -signal.SIGKILL, child.returncode
    async with SqliteSessionStore(path) as store:
        t = await store.begin_turn("beta", known=4, content="three", parts=(TextPart("three"),), title="three")
        await store.end_turn(t, content="3", reasoning="", stop_reason="max_tokens", outcome="complete")
        await store.fork_session("alpha", "gamma", cwd="/work/fork")


if __name__ == "__main__":
    if sys.argv[1] == "--kill":
        _, _, db, sid, known, text = sys.argv
        anyio.run(_killed_turn, Path(db), sid, int(known), text)
    else:
        target = Path(sys.argv[1])
        assert not target.exists(), f"{target} exists"
        anyio.run(_main, target)
