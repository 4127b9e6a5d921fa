"""Durable sessions over real pipes and real processes (issue 5): kill -9 mid-turn then load, two servers on one
state directory, a database the server must not touch, list pagination, resume/close, the official client's load.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process
from acp.schema import AgentMessageChunk, AgentThoughtChunk, SessionNotification, UserMessageChunk

from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip
from tests.acp_blocks import resource_link_block, text_block

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "acp_server", *args]


@asynccontextmanager
async def spawn(*args: str, home: Path) -> AsyncIterator[AgentProcess]:
    """A server process; ``home`` is its HOME and XDG_STATE_HOME parent (nothing reaches the real one)."""
    async with spawn_agent(*args, env={"HOME": str(home), "XDG_STATE_HOME": str(home / "state")}) as agent:
        yield agent


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


async def _ask(agent: AgentProcess, session_id: str, text: str) -> dict[str, Any]:
    return await agent.request("session/prompt", _prompt(session_id, text), timeout=20)


async def _load(agent: AgentProcess, session_id: str, cwd: str) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """``session/load``: its reply and the replayed updates as (kind, text, outcome) triples, in order (the title's
    ``session_info_update`` that ends a replay aside: ``test_model_picker`` checks it)."""
    msg_id = await agent.request_nowait("session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []})
    reply, seen = await agent.until_response(msg_id, timeout=20)
    if "result" in reply:
        await agent.commands_update(session_id)  # right after the answer
    updates = []
    for message in seen:
        assert message["method"] == "session/update" and message["params"]["sessionId"] == session_id
        update = message["params"]["update"]
        if update["sessionUpdate"] == "session_info_update":
            continue
        outcome = update.get("_meta", {}).get("acpServer", {}).get("outcome")
        updates.append((update["sessionUpdate"], update["content"]["text"], outcome))
    return reply, updates


def _turn(prompt: str, answer: str, reasoning: str = "") -> list[tuple[Any, ...]]:
    thought = [("agent_thought_chunk", reasoning, None)] if reasoning else []
    return [("user_message_chunk", prompt, None), *thought, ("agent_message_chunk", answer, None)]


async def test_kill_9_mid_turn_then_load_replays_the_completed_turns_and_the_marked_prompt(tmp_path: Path) -> None:
    state = tmp_path / "state-dir"
    cwd = str(tmp_path)
    async with LoopbackModel() as model:
        model.enqueue(
            Answer(text="first answer", reasoning="thinking one"),
            Answer(text="second answer", reasoning="thinking two"),
            SlowDrip(interval_s=0.05, text="never finished " * 500),
        )
        async with spawn("--state-dir", str(state), "--base-url", model.base_url, "--model", "m", home=tmp_path) as a:
            init = await a.initialize()
            assert init["result"]["agentCapabilities"]["loadSession"] is True
            session_id = await a.new_session(cwd)
            assert (await _ask(a, session_id, "one"))["result"]["stopReason"] == "end_turn"
            assert (await _ask(a, session_id, "two"))["result"]["stopReason"] == "end_turn"
            third = await a.request_nowait("session/prompt", _prompt(session_id, "three"))
            first = await a.receive()  # a streamed chunk of the third answer: the turn is running
            assert first["method"] == "session/update"
            assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            a.process.kill()  # SIGKILL
            assert await a.process.wait() == -9
            assert third  # never answered

        model.enqueue(Answer(text="fourth answer", reasoning=""))
        async with spawn("--state-dir", str(state), "--base-url", model.base_url, "--model", "m", home=tmp_path) as b:
            await b.initialize()
            reply, updates = await _load(b, session_id, cwd)
            assert reply["result"]["modes"]["currentModeId"] == "default"  # the answer: the session's modes
            assert updates == [
                *_turn("one", "first answer", "thinking one"),
                *_turn("two", "second answer", "thinking two"),
                ("user_message_chunk", "three", None),
                ("agent_message_chunk", "", "interrupted"),
            ]
            # The loaded session goes on, and the model gets the stored history.
            assert (await _ask(b, session_id, "four"))["result"]["stopReason"] == "end_turn"
            history = model.requests[-1].body["messages"]
            assert [(m["role"], m["content"]) for m in history[1:]] == [
                ("user", "one"),
                ("assistant", "first answer"),
                ("user", "two"),
                ("assistant", "second answer"),
                ("user", "three"),
                ("user", "four"),
            ]
    with sqlite3.connect(state / "sessions.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_two_servers_on_one_state_dir_write_concurrently_and_both_sessions_are_intact(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    turns = 6
    async with LoopbackModel() as model:
        model.enqueue(*(Answer(reasoning="", chunk_delay_s=0.005) for _ in range(2 * turns)))  # "You said: …"
        args = ("--state-dir", state, "--base-url", model.base_url, "--model", "m")
        ids: dict[str, str] = {}
        async with spawn(*args, home=tmp_path) as a, spawn(*args, home=tmp_path) as b:

            async def converse(agent: AgentProcess, name: str) -> None:
                await agent.initialize()
                ids[name] = session_id = await agent.new_session(f"/work/{name}")
                for i in range(turns):
                    reply = await _ask(agent, session_id, f"{name}-{i}")
                    assert reply["result"]["stopReason"] == "end_turn", reply

            async with anyio.create_task_group() as tg:
                tg.start_soon(converse, a, "A")
                tg.start_soon(converse, b, "B")

        async with spawn(*args, home=tmp_path) as c:
            await c.initialize()
            listed = (await c.request("session/list", {}))["result"]["sessions"]
            assert {s["sessionId"] for s in listed} == set(ids.values())
            for name, session_id in ids.items():
                _, updates = await _load(c, session_id, f"/work/{name}")
                expected = [u for i in range(turns) for u in _turn(f"{name}-{i}", f"You said: {name}-{i}")]
                assert updates == expected
    with sqlite3.connect(Path(state) / "sessions.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_a_turn_running_in_another_process_is_never_interleaved(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.05, text="slowly " * 20))
        args = ("--state-dir", state, "--base-url", model.base_url, "--model", "m")
        async with spawn(*args, home=tmp_path) as a, spawn(*args, home=tmp_path) as b:
            await a.initialize()
            await b.initialize()
            session_id = await a.new_session("/w")
            running = await a.request_nowait("session/prompt", _prompt(session_id, "from A"))
            await model.wait_for_requests(1)

            # B sees what A committed: the prompt, and an answer marked running.
            loaded, updates = await _load(b, session_id, "/w")
            assert "result" in loaded, (loaded, b.stderr[-2000:])
            expected = [("user_message_chunk", "from A", None), ("agent_message_chunk", "", "running")]
            assert updates == expected, (loaded, b.stderr[-2000:], a.stderr[-2000:])
            busy = await _ask(b, session_id, "from B")
            assert busy["error"]["code"] == -32603
            assert busy["error"]["data"]["errorKind"] == "session_busy"
            assert busy["error"]["data"]["retryable"] is True

            reply, _ = await a.until_response(running, timeout=20)
            assert reply["result"]["stopReason"] == "end_turn"
            assert (await _ask(b, session_id, "from B"))["result"]["stopReason"] == "end_turn"
            # B's model request carries A's finished turn: history is read from the store.
            history = model.requests[-1].body["messages"]
            assert [(m["role"], m["content"].strip()) for m in history[1:]] == [
                ("user", "from A"),
                ("assistant", "slowly " * 19 + "slowly"),
                ("user", "from B"),
            ]


@pytest.mark.parametrize("damage", ["garbage", "newer_schema", "other_application"])
async def test_a_database_it_cannot_use_is_reported_and_left_untouched(tmp_path: Path, damage: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    path = state / "sessions.db"
    if damage == "garbage":
        path.write_bytes(b"this is not a database\n" * 300)
        reason = "corrupt"
    else:
        with sqlite3.connect(path) as db:
            if damage == "newer_schema":
                db.execute("PRAGMA application_id = 1094930515")
                db.execute("PRAGMA user_version = 99")
            db.execute("CREATE TABLE things (x)")
        reason = "schema_too_new" if damage == "newer_schema" else "not_ours"
    before = path.read_bytes()
    files_before = sorted(p.name for p in state.iterdir())

    # an endpoint (never reached), so the store is what refuses the sessions
    async with spawn("--state-dir", str(state), "--base-url", "http://127.0.0.1:9/v1", home=tmp_path) as agent:
        init = await agent.initialize()
        store = init["result"]["agentCapabilities"]["_meta"]["acpServer"]["sessionStore"]
        assert store["available"] is False and store["errorKind"] == "store_unavailable"
        for method, params in [
            ("session/new", {"cwd": "/w", "mcpServers": []}),
            ("session/list", {}),
            ("session/load", {"sessionId": "x", "cwd": "/w", "mcpServers": []}),
            ("session/resume", {"sessionId": "x", "cwd": "/w"}),
        ]:
            error = (await agent.request(method, params))["error"]
            assert error["code"] == -32603, method
            assert error["data"]["errorKind"] == "store_unavailable"
            assert error["data"]["reason"] == reason
            assert error["data"]["path"] == str(path)
            assert str(path) in error["message"] and "untouched" in error["message"]
        await agent.close_stdin()
        assert await agent.process.wait() == 0
    assert b"Session store unavailable" in agent.stderr and str(path).encode() in agent.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in state.iterdir()) == files_before  # no -wal / -shm either


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
async def test_a_read_only_state_dir_is_reported(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o500)
    try:
        async with spawn("--state-dir", str(state), home=tmp_path) as agent:
            await agent.initialize()
            error = (await agent.request("session/new", {"cwd": "/w", "mcpServers": []}))["error"]
            assert error["data"]["reason"] == "read_only"
    finally:
        state.chmod(0o700)


async def test_list_is_newest_first_filtered_by_cwd_and_paginated(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    async with (
        LoopbackModel() as model,
        spawn("--state-dir", state, "--base-url", model.base_url, "--model", "m", home=tmp_path) as agent,
    ):
        if True:
            await agent.initialize()
            mine = [await agent.new_session("/project") for _ in range(57)]
            others = [await agent.new_session("/elsewhere") for _ in range(3)]
            model.enqueue(Answer(text="ok", reasoning=""))
            assert (await _ask(agent, mine[10], "Fix the flaky test\nplease"))["result"]["stopReason"] == "end_turn"

            pages: list[list[dict[str, Any]]] = []
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"cwd": "/project"}
                if cursor is not None:
                    params["cursor"] = cursor
                result = (await agent.request("session/list", params))["result"]
                pages.append(result["sessions"])
                cursor = result.get("nextCursor")
                if cursor is None:
                    break
            assert [len(page) for page in pages] == [50, 7]
            listed = [s for page in pages for s in page]
            assert listed[0]["sessionId"] == mine[10] and listed[0]["title"] == "Fix the flaky test"
            assert [s["sessionId"] for s in listed[1:]] == [s for s in reversed(mine) if s != mine[10]]
            assert all(s["cwd"] == "/project" for s in listed)
            stamps = [s["updatedAt"] for s in listed]
            assert stamps == sorted(stamps, reverse=True)

            everything = (await agent.request("session/list", {}))["result"]
            assert [s["sessionId"] for s in everything["sessions"][:4]] == [mine[10], *reversed(others)]
            bad = await agent.request("session/list", {"cursor": "not-a-cursor"})
            assert bad["error"]["code"] == -32602


async def test_resume_close_and_unknown_ids(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    async with LoopbackModel() as model:
        args = ("--state-dir", state, "--base-url", model.base_url, "--model", "m")
        async with spawn(*args, home=tmp_path) as a:
            await a.initialize()
            session_id = await a.new_session("/w")
            assert (await _ask(a, session_id, "remember me"))["result"]["stopReason"] == "end_turn"
        async with spawn(*args, home=tmp_path) as b:
            await b.initialize()
            prompt_before = await _ask(b, session_id, "too early")
            assert prompt_before["error"]["code"] == -32002  # not attached here yet
            resumed = await b.request_nowait("session/resume", {"sessionId": session_id, "cwd": "/w"})
            reply, seen = await b.until_response(resumed)
            assert reply["result"]["modes"]["currentModeId"] == "default" and seen == []  # no replay
            assert (await _ask(b, session_id, "and now?"))["result"]["stopReason"] == "end_turn"
            history = model.requests[-1].body["messages"]
            assert [m["content"] for m in history[1:]] == ["remember me", "You said: remember me", "and now?"]

            assert (await b.request("session/close", {"sessionId": session_id}))["result"] == {}
            assert (await _ask(b, session_id, "after close"))["error"]["code"] == -32002
            assert (await b.request("session/close", {"sessionId": session_id}))["result"] == {}  # stored: no-op
            _, updates = await _load(b, session_id, "/w")  # history stays
            assert [u[1] for u in updates if u[0] != "agent_thought_chunk"] == [
                "remember me",
                "You said: remember me",
                "and now?",
                "You said: and now?",
            ]

            for method, params in [
                ("session/load", {"sessionId": "nope", "cwd": "/w", "mcpServers": []}),
                ("session/resume", {"sessionId": "nope", "cwd": "/w"}),
                ("session/close", {"sessionId": "nope"}),
            ]:
                error = (await b.request(method, params))["error"]
                assert error["code"] == -32002, method
                assert error["data"] == {"errorKind": "session_not_found", "sessionId": "nope", "retryable": False}


async def test_close_cancels_the_running_prompt_and_keeps_what_was_streamed(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="partial " * 1000))
        args = ("--state-dir", state, "--base-url", model.base_url, "--model", "m")
        async with spawn(*args, home=tmp_path) as agent:
            await agent.initialize()
            session_id = await agent.new_session("/w")
            running = await agent.request_nowait("session/prompt", _prompt(session_id, "go"))
            streamed = []
            while len(streamed) < 3:
                message = await agent.receive()
                if "content" in message["params"]["update"]:  # not the title (session_info_update)
                    streamed.append(message["params"]["update"]["content"]["text"])
            closed = await agent.request_nowait("session/close", {"sessionId": session_id})
            reply, seen = await agent.until_response(running)
            assert reply["error"]["data"]["errorKind"] == "session_closed"
            streamed += [m["params"]["update"]["content"]["text"] for m in seen if m.get("method")]
            reply, seen = await agent.until_response(closed)
            streamed += [m["params"]["update"]["content"]["text"] for m in seen if m.get("method")]
            assert reply["result"] == {}
            await model.wait_for_disconnects(1)

            _, updates = await _load(agent, session_id, "/w")
            assert updates[0] == ("user_message_chunk", "go", None)
            assert updates[1] == ("agent_message_chunk", "".join(streamed), "cancelled")


@pytest.mark.parametrize("how", ["eof", "sigterm"])
async def test_shutdown_mid_turn_records_the_cancelled_answer_before_the_store_closes(tmp_path: Path, how: str) -> None:
    state = str(tmp_path / "state")
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="word " * 1000))
        args = ("--state-dir", state, "--base-url", model.base_url, "--model", "m")
        async with spawn(*args, home=tmp_path) as a:
            await a.initialize()
            session_id = await a.new_session("/w")
            running = await a.request_nowait("session/prompt", _prompt(session_id, "long"))
            assert (await a.receive())["method"] == "session/update"
            if how == "eof":
                await a.close_stdin()
            else:
                a.process.send_signal(signal.SIGTERM)
            reply, _ = await a.until_response(running)
            assert reply["result"] == {"stopReason": "cancelled"}
            assert await a.process.wait() == 0
        async with spawn(*args, home=tmp_path) as b:
            await b.initialize()
            _, updates = await _load(b, session_id, "/w")
            assert updates[0] == ("user_message_chunk", "long", None)
            kind, text, outcome = updates[1]
            assert kind == "agent_message_chunk" and text.startswith("word") and outcome == "cancelled"


async def test_no_persist_keeps_sessions_in_memory_only(tmp_path: Path) -> None:
    async with (
        LoopbackModel() as model,
        spawn("--no-persist", "--base-url", model.base_url, "--model", "m", home=tmp_path) as agent,
    ):
        if True:
            init = await agent.initialize()
            assert init["result"]["agentCapabilities"]["_meta"]["acpServer"]["sessionStore"] == {
                "persistent": False,
                "available": True,
            }
            session_id = await agent.new_session("/w")
            model.enqueue(Answer(reasoning="hmm"))
            assert (await _ask(agent, session_id, "hi"))["result"]["stopReason"] == "end_turn"
            await agent.request("session/close", {"sessionId": session_id})
            _, updates = await _load(agent, session_id, "/w")
            assert updates == _turn("hi", "You said: hi", "hmm")
    assert _files(tmp_path) == []  # nothing was written: no state dir, no database


class RecordingClient:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.streaming = anyio.Event()  # an answer chunk arrived
        self._changed = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if isinstance(update, AgentMessageChunk):
            self.streaming.set()
        self._changed.set()

    async def wait_for(self, count: int) -> None:
        while len(self.updates) < count:
            self._changed = anyio.Event()
            await self._changed.wait()

    def on_connect(self, conn: Any) -> None:
        pass


async def test_the_official_client_receives_every_replayed_update(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    raw_path = tmp_path / "stdout.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_", "XDG_"))}
    env.update(HOME=str(tmp_path))
    async with LoopbackModel() as model:
        model.enqueue(
            Answer(text="first answer", reasoning="first thoughts"),
            Answer(text="second answer", reasoning=""),
            SlowDrip(interval_s=0.02, text="cut " * 500),
        )
        server = shlex.join(server_command("--state-dir", state, "--base-url", model.base_url, "--model", "m"))
        writer = RecordingClient()
        async with spawn_agent_process(writer, "sh", "-c", server, env=env) as (conn, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("hello")])
            await conn.prompt(
                session_id=session.session_id,
                prompt=[text_block("with a link"), resource_link_block("a.py", "file:///a.py")],
            )
            writer.streaming = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(conn.prompt, session.session_id, [text_block("long one")])
                with anyio.fail_after(10):
                    await writer.streaming.wait()
                await conn.cancel(session_id=session.session_id)

        reader = RecordingClient()
        command = f"{server} | tee {shlex.quote(str(raw_path))}"
        async with spawn_agent_process(reader, "sh", "-c", command, env=env) as (conn, _):
            init = await conn.initialize(protocol_version=1)
            assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
            await conn.load_session(cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[])
            with anyio.fail_after(5):  # the SDK delivers notifications from tasks of their own
                await reader.wait_for(10)
    # tee may write its file after the client has read the same bytes from the pipe: a bounded wait for the file
    written: list[dict[str, Any]] = []
    with anyio.fail_after(5):
        while len(written) < len(reader.updates):  # a file: no event to await
            await anyio.sleep(0.01)
            raw = [json.loads(line) for line in raw_path.read_text().splitlines()]
            written = [m for m in raw if m.get("method") == "session/update"]
    assert len(written) == len(reader.updates) == 10
    for message in written:
        SessionNotification.model_validate(message["params"])
    assert [m["params"]["update"]["sessionUpdate"] for m in written] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
        "session_info_update",  # the title, last of the replay
        "available_commands_update",  # after the answer
    ]
    cancelled = [u for u in reader.updates if isinstance(u, AgentMessageChunk) and u.field_meta]
    assert len(cancelled) == 1
    assert cancelled[0].field_meta == {"acpServer": {"outcome": "cancelled", "stopReason": "cancelled"}}
    assert any(isinstance(u, UserMessageChunk) and u.content.type == "resource_link" for u in reader.updates)
    assert any(isinstance(u, AgentThoughtChunk) and u.content.text == "first thoughts" for u in reader.updates)
