"""Modes over ACP, both ways v1 clients read them: ``modes`` with ``session/set_mode`` and ``current_mode_update``,
and the ``category: "mode"`` config option with ``session/set_config_option`` and ``config_option_update``. Every
change sends both updates and they agree; an unknown id is -32602 and changes nothing; a new session starts in the
server's default mode, stored with it like a chosen one, and comes back with ``session/load`` and ``session/resume``
(also under a server with another default)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp.schema import LoadSessionResponse, NewSessionResponse, SessionNotification, SetSessionConfigOptionResponse

from acp_server.acp import AcpAgent, AgentOptions, bind
from acp_server.bridge import SessionBridge
from acp_server.errors import InvalidInputError
from acp_server.store import SessionStore, SqliteSessionStore

from ._support import FakePeer, InProcessAgent, Runner

pytestmark = pytest.mark.anyio

ALL_BUT_BYPASS = ("default", "accept-edits", "read-only")


@asynccontextmanager
async def agent(
    *, default_mode: str = "default", modes: Collection[str] = ALL_BUT_BYPASS, store: SessionStore | None = None
) -> AsyncIterator[InProcessAgent]:
    async with SessionBridge(Runner(), store=store, default_mode=default_mode, modes=modes) as bridge:
        yield InProcessAgent(bridge)


def current(answer: dict[str, Any]) -> tuple[str, str]:
    """(``modes.currentModeId``, the mode config option's ``currentValue``) of a session answer."""
    [option] = [o for o in answer["configOptions"] if o["category"] == "mode"]
    return answer["modes"]["currentModeId"], option["currentValue"]


def mode_updates(peer: FakePeer) -> list[tuple[str, Any]]:
    """Each update the peer got, validated by the official model, as (kind, the mode it names)."""
    seen: list[tuple[str, Any]] = []
    for method, params in peer.notifications:
        assert method == "session/update"
        SessionNotification.model_validate(params)
        update = params["update"]
        if update["sessionUpdate"] == "current_mode_update":
            seen.append(("current_mode_update", update["currentModeId"]))
        elif update["sessionUpdate"] == "config_option_update":
            [option] = [o for o in update["configOptions"] if o["category"] == "mode"]
            seen.append(("config_option_update", option["currentValue"]))
    return seen


async def test_a_new_session_is_in_the_default_mode_both_ways() -> None:
    async with agent(default_mode="accept-edits") as a:
        reply = await a.new_session()
        NewSessionResponse.model_validate(reply)
        assert current(reply) == ("accept-edits", "accept-edits")
        assert [m["id"] for m in reply["modes"]["availableModes"]] == list(ALL_BUT_BYPASS)
        [option] = [o for o in reply["configOptions"] if o["category"] == "mode"]
        assert option["id"] == "mode" and [o["value"] for o in option["options"]] == list(ALL_BUT_BYPASS)


@pytest.mark.parametrize("how", ["set_mode", "set_config_option"])
async def test_each_way_of_switching_sends_both_updates_and_they_agree(how: str) -> None:
    async with agent() as a:
        session_id = (await a.new_session())["sessionId"]
        peer = FakePeer(2, a.bridge)
        if how == "set_mode":
            answer = await a.call("session/set_mode", {"sessionId": session_id, "modeId": "read-only"}, peer)
            assert answer == {}
        else:
            params = {"sessionId": session_id, "configId": "mode", "value": "read-only"}
            answer = await a.call("session/set_config_option", params, peer)
            SetSessionConfigOptionResponse.model_validate(answer)
            assert [o["currentValue"] for o in answer["configOptions"] if o["id"] == "mode"] == ["read-only"]
        assert mode_updates(peer) == [("current_mode_update", "read-only"), ("config_option_update", "read-only")]
        assert a.bridge.get(session_id).mode == "read-only"
        resumed = await a.call("session/resume", {"sessionId": session_id, "cwd": "/tmp"})
        assert current(resumed) == ("read-only", "read-only")


@pytest.mark.parametrize(
    ("method", "field", "value"),
    [
        ("session/set_mode", "modeId", "no-such-mode"),
        ("session/set_mode", "modeId", "bypass-permissions"),  # not offered by this server
        ("session/set_config_option", "value", "no-such-mode"),
        ("session/set_config_option", "value", "bypass-permissions"),
    ],
)
async def test_an_unknown_mode_is_invalid_params_and_changes_nothing(method: str, field: str, value: str) -> None:
    async with agent() as a:
        session_id = (await a.new_session())["sessionId"]
        peer = FakePeer(2, a.bridge)
        params = (
            {"sessionId": session_id, "modeId": value}
            if method == "session/set_mode"
            else {"sessionId": session_id, "configId": "mode", "value": value}
        )
        with pytest.raises(InvalidInputError) as refused:
            await a.call(method, params, peer)
        assert refused.value.errors[0]["field"] == field and "available: default, accept-edits, read-only" in str(
            refused.value
        )
        problem = f"unknown mode {value!r}; available: default, accept-edits, read-only"  # the bridge's rule
        assert str(refused.value) == f"Invalid params for {method}: {field}: {problem}"
        assert refused.value.errors == [{"field": field, "message": problem}]
        assert peer.notifications == []
        assert a.bridge.get(session_id).mode == "default"
        record = await a.bridge.store.get_session(session_id)
        assert record is not None and record.mode == "default"  # as created: the refused one was not stored


async def test_a_chosen_mode_is_stored_and_comes_back_with_load_and_resume(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store, agent(store=store) as a:
        session_id = (await a.new_session())["sessionId"]
        await a.call("session/set_mode", {"sessionId": session_id, "modeId": "accept-edits"})
    async with SqliteSessionStore(path) as store, agent(store=store) as b:  # another process, same file
        loaded = await b.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        LoadSessionResponse.model_validate(loaded)
        assert current(loaded) == ("accept-edits", "accept-edits")
    async with SqliteSessionStore(path) as store, agent(store=store) as c:
        resumed = await c.call("session/resume", {"sessionId": session_id, "cwd": "/tmp"})
        assert current(resumed) == ("accept-edits", "accept-edits")
        assert c.bridge.get(session_id).mode == "accept-edits"  # what the turn applies


EVERY_MODE = (*ALL_BUT_BYPASS, "bypass-permissions")


async def test_the_mode_a_session_starts_in_is_stored_so_another_default_does_not_change_it(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store, agent(store=store) as a:  # default "default", never switched
        session_id = (await a.new_session())["sessionId"]
        record = await store.get_session(session_id)
        assert record is not None and record.mode == "default"
    # Another process, same file, a more permissive default: the session keeps the mode it started in.
    async with SqliteSessionStore(path) as store, agent(
        store=store, default_mode="bypass-permissions", modes=EVERY_MODE
    ) as b:
        loaded = await b.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        assert current(loaded) == ("default", "default")
        assert b.bridge.get(session_id).mode == "default"  # what the turn applies
        forked = await b.call("session/fork", {"sessionId": session_id, "cwd": "/tmp"})
        assert current(forked) == ("default", "default")
        fresh = (await b.new_session())["sessionId"]
        assert current(await b.call("session/resume", {"sessionId": fresh, "cwd": "/tmp"}))[0] == "bypass-permissions"
    async with SqliteSessionStore(path) as store, agent(
        store=store, default_mode="bypass-permissions", modes=EVERY_MODE
    ) as c:
        for stored in (session_id, forked["sessionId"]):
            resumed = await c.call("session/resume", {"sessionId": stored, "cwd": "/tmp"})
            assert current(resumed) == ("default", "default")


async def test_a_stored_mode_this_server_does_not_offer_reads_as_its_default_and_stays_stored(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store, agent(
        store=store, default_mode="bypass-permissions", modes=EVERY_MODE
    ) as a:
        session_id = (await a.new_session())["sessionId"]  # starts in bypass-permissions, never switched
    async with SqliteSessionStore(path) as store, agent(store=store, default_mode="accept-edits") as b:  # no bypass
        loaded = await b.call("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
        assert current(loaded) == ("accept-edits", "accept-edits")
        assert b.bridge.get(session_id).mode == "accept-edits"  # bypass is never applied here
        forked = await b.call("session/fork", {"sessionId": session_id, "cwd": "/tmp"})
        assert current(forked) == ("accept-edits", "accept-edits")
    async with SqliteSessionStore(path) as store, agent(store=store, modes=EVERY_MODE) as c:  # default "default"
        resumed = await c.call("session/resume", {"sessionId": session_id, "cwd": "/tmp"})
        assert current(resumed) == ("bypass-permissions", "bypass-permissions")  # kept where it is offered
        child = await c.call("session/resume", {"sessionId": forked["sessionId"], "cwd": "/tmp"})
        assert current(child) == ("accept-edits", "accept-edits")  # the mode the fork started in


async def test_setting_the_mode_it_has_announces_nothing_and_the_answer_still_carries_it() -> None:
    async with agent() as a:
        session_id = (await a.new_session())["sessionId"]
        peer = FakePeer(2, a.bridge)
        assert await a.call("session/set_mode", {"sessionId": session_id, "modeId": "default"}, peer) == {}
        params = {"sessionId": session_id, "configId": "mode", "value": "default"}
        answer = await a.call("session/set_config_option", params, peer)
        assert [o["currentValue"] for o in answer["configOptions"] if o["id"] == "mode"] == ["default"]
        assert peer.notifications == []


async def test_a_change_on_one_connection_is_announced_once_on_each_other_attached_one() -> None:
    """Three agents over one bridge (three connections): the one that changes the mode tells its client through its
    request; an attached one hears it through its transport's announce; one never attached hears nothing."""
    async with agent() as a:
        heard: dict[str, list[tuple[str, str, Any]]] = {"attached": [], "stranger": []}
        attached = bind(AcpAgent(a.bridge, AgentOptions(), lambda *m: heard["attached"].append(m)))[0]
        stranger = AcpAgent(a.bridge, AgentOptions(), lambda *m: heard["stranger"].append(m))
        session_id = (await a.new_session())["sessionId"]
        await attached["session/resume"]({"sessionId": session_id, "cwd": "/tmp"}, FakePeer(1, a.bridge))
        peer = FakePeer(2, a.bridge)
        await a.call("session/set_mode", {"sessionId": session_id, "modeId": "read-only"}, peer)
        await a.call("session/set_mode", {"sessionId": session_id, "modeId": "read-only"}, peer)  # no change
        expected = [("current_mode_update", "read-only"), ("config_option_update", "read-only")]
        assert mode_updates(peer) == expected
        told = FakePeer(3)
        for sid, method, params in heard["attached"]:
            assert sid == session_id
            await told.notify(method, params)
        assert mode_updates(told) == expected
        assert heard["stranger"] == []
        stranger.close()
