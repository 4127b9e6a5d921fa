"""A session's model and title, for both stores: stored by their own transaction, read by every reader, copied by
fork; the title a turn leaves comes back in its ticket."""

from __future__ import annotations

import pytest

from acp_server.domain import TextPart
from acp_server.store import SessionStore, StoredSessionNotFoundError

pytestmark = pytest.mark.anyio


async def test_the_model_is_stored_returned_by_every_reader_and_cleared_with_none(store: SessionStore) -> None:
    created = await store.create_session("s1", "/w")
    await store.create_session("s2", "/w")
    assert created.model is None
    await store.set_model("s1", "gpt-4o")
    record = await store.get_session("s1")
    assert record is not None and (record.model, record.mode) == ("gpt-4o", None)
    assert record.updated_us == created.updated_us  # a setting, not activity: the list order stays
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.record.model == "gpt-4o"
    assert {r.session_id: r.model for r in (await store.list_sessions()).sessions} == {"s1": "gpt-4o", "s2": None}
    await store.set_model("s1", None)
    record = await store.get_session("s1")
    assert record is not None and record.model is None
    with pytest.raises(StoredSessionNotFoundError):
        await store.set_model("nope", "m")


async def test_a_set_title_wins_over_the_first_prompt_and_an_empty_one_lets_the_next_prompt_title_it(
    store: SessionStore,
) -> None:
    await store.create_session("s1", "/w")
    await store.set_title("s1", "Refactor the parser")
    ticket = await store.begin_turn("s1", known=0, content="hi", parts=(TextPart("hi"),), title="hi")
    assert ticket.title == "Refactor the parser"
    await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")
    await store.set_title("s1", "")
    ticket = await store.begin_turn("s1", known=2, content="next", parts=(TextPart("next"),), title="next")
    assert ticket.title == "next"
    record = await store.get_session("s1")
    assert record is not None and record.title == "next"
    with pytest.raises(StoredSessionNotFoundError):
        await store.set_title("nope", "t")


async def test_the_first_prompt_titles_the_session_and_its_ticket_says_so(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    first = await store.begin_turn("s1", known=0, content="one", parts=(TextPart("one"),), title="one")
    assert first.title == "one"
    await store.end_turn(first, content="1", reasoning="", stop_reason="end_turn", outcome="complete")
    second = await store.begin_turn("s1", known=2, content="two", parts=(TextPart("two"),), title="two")
    assert second.title == "one"


async def test_fork_copies_the_model_and_the_title(store: SessionStore) -> None:
    await store.create_session("src", "/w")
    await store.set_model("src", "claude-sonnet-4")
    await store.set_title("src", "Named")
    child = await store.fork_session("src", "child", cwd="/elsewhere")
    assert (child.model, child.title) == ("claude-sonnet-4", "Named")
    await store.set_model("src", "other")
    record = await store.get_session("child")
    assert record is not None and record.model == "claude-sonnet-4"
