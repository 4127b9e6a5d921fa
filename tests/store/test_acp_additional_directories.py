"""ACP ``additionalDirectories`` through the method table, on a real SQLite store: a session's extra roots are checked
once (a bad entry is -32602 naming it, and nothing is created or changed), stored with the session, activated whole by
``session/load`` and ``session/resume`` (omitted: none, as ACP says), a fork's own, reported by ``session/list``
(every entry a valid ``SessionInfo``), and kept across a restart."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ListSessionsResponse

from acp_server.bridge import MAX_ADDITIONAL_DIRECTORIES, SessionBridge
from acp_server.errors import InvalidInputError
from acp_server.store import SessionStore, SqliteSessionStore

from .test_acp_sessions import Agent, Peer, _never, dump

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, str]:
    made = {}
    for name in ("project", "lib", "docs", "other"):
        (tmp_path / name).mkdir()
        made[name] = str(tmp_path / name)
    (tmp_path / "project" / "inner").mkdir()
    made["inner"] = str(tmp_path / "project" / "inner")
    (tmp_path / "file.txt").write_text("x")
    made["file"] = str(tmp_path / "file.txt")
    return made


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[tuple[Agent, SessionBridge, SessionStore]]:
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(_never, store=store) as bridge:
        yield Agent(bridge, Peer()), bridge, store


async def _new(agent: Agent, cwd: str, directories: Any = None) -> str:
    params: dict[str, Any] = {"cwd": cwd, "mcpServers": []}
    if directories is not None:
        params["additionalDirectories"] = directories
    reply = await agent.call("session/new", params)
    return str(reply["sessionId"])


async def _listed(agent: Agent) -> dict[str, list[str] | None]:
    reply = await agent.call("session/list", {})
    assert dump(ListSessionsResponse.model_validate(reply)) == reply  # valid SessionInfo, as the SDK reads it
    return {info["sessionId"]: info.get("additionalDirectories") for info in reply["sessions"]}


async def test_new_stores_them_and_list_reports_them_in_order(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str]
) -> None:
    acp, bridge, store = agent
    sid = await _new(acp, dirs["project"], [dirs["lib"], dirs["docs"] + "/./"])
    plain = await _new(acp, dirs["project"])
    assert bridge.get(sid).additional_directories == (dirs["lib"], dirs["docs"])  # normalised
    record = await store.get_session(sid)
    assert record is not None and record.additional_directories == (dirs["lib"], dirs["docs"])
    assert await _listed(acp) == {sid: [dirs["lib"], dirs["docs"]], plain: None}  # none: omitted


async def test_entries_inside_the_cwd_and_repeats_are_dropped(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str], tmp_path: Path
) -> None:
    acp, bridge, _ = agent
    (tmp_path / "lib-link").symlink_to(dirs["lib"])
    sid = await _new(
        acp, dirs["project"], [dirs["project"], dirs["lib"], dirs["inner"], str(tmp_path / "lib-link"), dirs["docs"]]
    )
    assert bridge.get(sid).additional_directories == (dirs["lib"], dirs["docs"])


def _bad_entries(dirs: dict[str, str]) -> list[tuple[list[Any], str, str]]:
    """``(list, field, problem)``: a list with one bad entry, the field its refusal names, and the problem."""
    return [
        ([dirs["lib"], "relative/path"], "additionalDirectories[1]", "must be an absolute path"),
        ([dirs["lib"], dirs["docs"], dirs["lib"] + "/missing"], "additionalDirectories[2]", "does not exist"),
        ([dirs["file"]], "additionalDirectories[0]", "is not a directory"),
        ([dirs["lib"], 5], "additionalDirectories[1]", "must be a string (an absolute directory path)"),
        ([None], "additionalDirectories[0]", "must be a string (an absolute directory path)"),
        (["/tmp/\ud800"], "additionalDirectories[0]", "is not valid Unicode (it holds a lone surrogate)"),
        (["/tmp/a\x00b"], "additionalDirectories[0]", "contains a NUL byte"),
        (
            [dirs["lib"]] * (MAX_ADDITIONAL_DIRECTORIES + 1),
            "additionalDirectories",
            f"at most {MAX_ADDITIONAL_DIRECTORIES} directories are allowed; got {MAX_ADDITIONAL_DIRECTORIES + 1}",
        ),
    ]


async def test_a_bad_entry_is_refused_naming_it_and_creates_nothing(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str]
) -> None:
    acp, bridge, _ = agent
    for entries, field, problem in _bad_entries(dirs):
        with pytest.raises(InvalidInputError) as refused:
            await _new(acp, dirs["project"], entries)
        assert refused.value.errors == [{"field": field, "message": problem}], entries
        message = str(refused.value)
        assert message.startswith(f"Invalid params for session/new: {field}: {problem}"), message
        assert "\ud800" not in message  # a lone surrogate is never echoed
    assert await _listed(acp) == {} and bridge.sessions == ()


@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/fork"])
async def test_a_bad_entry_on_load_resume_or_fork_changes_nothing(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str], method: str
) -> None:
    acp, bridge, _ = agent
    sid = await _new(acp, dirs["project"], [dirs["lib"]])
    params = {"sessionId": sid, "cwd": dirs["project"], "mcpServers": []}
    with pytest.raises(InvalidInputError) as refused:
        await acp.call(method, {**params, "additionalDirectories": [dirs["docs"], "x"]})
    assert refused.value.errors == [{"field": "additionalDirectories[1]", "message": "must be an absolute path"}]
    assert str(refused.value).startswith(f"Invalid params for {method}: additionalDirectories[1]: must be")
    assert await _listed(acp) == {sid: [dirs["lib"]]}  # no fork made, the list unchanged
    assert bridge.get(sid).additional_directories == (dirs["lib"],)


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_load_and_resume_activate_the_requests_whole_list(
    tmp_path: Path, dirs: dict[str, str], method: str
) -> None:
    db = tmp_path / "sessions.db"
    async with SqliteSessionStore(db) as store, SessionBridge(_never, store=store) as bridge:
        acp = Agent(bridge, Peer())
        sid = await _new(acp, dirs["project"], [dirs["lib"], dirs["docs"]])
    async with SqliteSessionStore(db) as store, SessionBridge(_never, store=store) as bridge:  # a restart
        acp = Agent(bridge, Peer())
        assert await _listed(acp) == {sid: [dirs["lib"], dirs["docs"]]}  # stored, before anything attaches it
        base = {"sessionId": sid, "cwd": dirs["project"], "mcpServers": []}
        await acp.call(method, {**base, "additionalDirectories": [dirs["other"], dirs["lib"]]})
        assert bridge.get(sid).additional_directories == (dirs["other"], dirs["lib"])
        assert await _listed(acp) == {sid: [dirs["other"], dirs["lib"]]}
        await acp.call(method, {**base, "additionalDirectories": [dirs["docs"]]})  # attached: replaced again
        assert bridge.get(sid).additional_directories == (dirs["docs"],)
        await acp.call(method, base)  # omitted: no additional roots are activated (ACP)
        assert bridge.get(sid).additional_directories == ()
        assert await _listed(acp) == {sid: None}
    async with SqliteSessionStore(db) as store:
        record = await store.get_session(sid)
        assert record is not None and record.additional_directories == ()


async def test_a_fork_takes_its_requests_list(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str]
) -> None:
    acp, bridge, store = agent
    sid = await _new(acp, dirs["project"], [dirs["lib"]])
    base = {"sessionId": sid, "cwd": dirs["project"], "mcpServers": []}
    asked = {**base, "additionalDirectories": [dirs["docs"], dirs["inner"]]}
    own = (await acp.call("session/fork", asked))["sessionId"]
    bare = (await acp.call("session/fork", base))["sessionId"]
    assert bridge.get(own).additional_directories == (dirs["docs"],)  # the one inside the cwd dropped
    assert bridge.get(bare).additional_directories == ()  # omitted: none, not the source's
    assert bridge.get(sid).additional_directories == (dirs["lib"],)
    assert await _listed(acp) == {sid: [dirs["lib"]], own: [dirs["docs"]], bare: None}
    record = await store.get_session(own)
    assert record is not None and record.additional_directories == (dirs["docs"],)


async def test_the_bridge_keeps_a_sessions_list_when_a_face_gives_none(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str]
) -> None:
    acp, bridge, _ = agent
    sid = await _new(acp, dirs["project"], [dirs["lib"]])
    await bridge.close_session(sid)
    entry = await bridge.resume_session(sid)  # a face that says nothing of them (REST without the field)
    assert entry.additional_directories == (dirs["lib"],)
    child = await bridge.fork(sid)
    assert child.additional_directories == (dirs["lib"],)  # the source's


async def test_a_huge_entry_is_refused_as_too_long_and_not_echoed_whole(
    agent: tuple[Agent, SessionBridge, SessionStore], dirs: dict[str, str]
) -> None:
    acp, bridge, _ = agent
    huge = "/" + "a" * 100_000
    with pytest.raises(InvalidInputError) as refused:
        await _new(acp, dirs["project"], [dirs["lib"], huge])
    problem = f"is longer than the {os.pathconf('/', 'PC_PATH_MAX')} bytes a path may have"
    assert refused.value.errors == [{"field": "additionalDirectories[1]", "message": problem}]
    message = str(refused.value)
    assert message.startswith(f"Invalid params for session/new: additionalDirectories[1]: {problem}, got '/aaa")
    assert len(message) < 500 and message.endswith("… (100001 characters)")
    assert await _listed(acp) == {} and bridge.sessions == ()
