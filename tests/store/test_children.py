"""Subagent children in the store, for every store (SQLite, memory, PostgreSQL): a child names its parent
(``task_of``), is stored like any session, is never in ``list_sessions``, is listed under its parent, and is
deleted with it."""

from __future__ import annotations

import pytest

from acp_server.domain import TextPart
from acp_server.store import SessionStore

pytestmark = pytest.mark.anyio


async def test_a_child_is_stored_linked_to_its_parent_and_listed_only_under_it(store: SessionStore) -> None:
    await store.create_session("parent", "/w")
    await store.create_session("other", "/w")
    first = await store.create_session("c1", "/w", mode="read-only", task_of="parent")
    second = await store.create_session("c2", "/w", task_of="parent")
    assert first.task_of == "parent" and (await store.get_session("c1")) == first
    ticket = await store.begin_turn("c1", known=0, content="look", parts=(TextPart("look"),), title="look")
    await store.end_turn(ticket, content="seen", reasoning="", stop_reason="end_turn", outcome="complete")

    snapshot = await store.read_session("c1")
    assert snapshot is not None and snapshot.record.task_of == "parent"
    assert [(m.role, m.content) for m in snapshot.messages] == [("user", "look"), ("assistant", "seen")]
    assert sorted(r.session_id for r in (await store.list_sessions()).sessions) == ["other", "parent"]
    assert [r.session_id for r in (await store.list_sessions(cwd="/w", limit=1)).sessions] == ["other"]
    assert [r.session_id for r in await store.list_children("parent")] == ["c1", second.session_id]
    assert await store.list_children("other") == () and await store.list_children("nope") == ()
    parent = await store.get_session("parent")
    assert parent is not None and parent.task_of is None


async def test_deleting_the_parent_deletes_its_children_and_nothing_else(store: SessionStore) -> None:
    await store.create_session("parent", "/w")
    await store.create_session("other", "/w")
    await store.create_session("c1", "/w", task_of="parent")
    await store.create_session("c9", "/w", task_of="other")
    ticket = await store.begin_turn("c1", known=0, content="look", parts=(TextPart("look"),), title="look")
    await store.end_turn(ticket, content="seen", reasoning="", stop_reason="end_turn", outcome="complete")

    await store.delete_session("parent")

    assert await store.get_session("c1") is None and await store.read_session("c1") is None
    assert await store.list_children("parent") == ()
    assert [r.session_id for r in await store.list_children("other")] == ["c9"]
    await store.create_session("c1", "/w")  # nothing of it is left behind: the id starts empty
    fresh = await store.read_session("c1")
    assert fresh is not None and fresh.messages == () and fresh.record.task_of is None
