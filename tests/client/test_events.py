"""``DaemonClient.events``: typed events, reconnecting with ``Last-Event-ID``, ``resync_required``, the end."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from acp_server.client import (
    DaemonClient,
    DaemonClientClosedError,
    DaemonEvent,
    DaemonSessionNotFoundError,
    DaemonTurnError,
    EventStream,
    PromptAcceptedEvent,
    ResyncRequiredEvent,
    SessionClosedEvent,
    SessionUpdateEvent,
    TurnCompleteEvent,
    TurnErrorEvent,
)
from acp_server.provider.offline import Answer, ErrorStatus, LoopbackModel, SlowDrip

from ._support import Recorder, running_daemon

pytestmark = pytest.mark.anyio

WORDS = [f"w{i}" for i in range(12)]


async def until(events: EventStream, predicate: Callable[[DaemonEvent], bool]) -> list[DaemonEvent]:
    seen: list[DaemonEvent] = []
    with anyio.fail_after(5):
        async for event in events:
            seen.append(event)
            if predicate(event):
                return seen
    return seen


async def test_typed_events_of_a_turn() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served, DaemonClient(served.url) as client:
        session_id = await client.create_session("/tmp")
        model.enqueue(Answer(text="hi there", reasoning="hmm"), ErrorStatus(400))
        async with client.events(session_id) as events:
            ok = await client.prompt(session_id, "hello", wait=True)
            with pytest.raises(DaemonTurnError):
                await client.prompt(session_id, "again")
            seen = await until(events, lambda e: isinstance(e, TurnErrorEvent))
        accepted = [e for e in seen if isinstance(e, PromptAcceptedEvent)]
        assert [e.pending_count for e in accepted] == [1, 1] and accepted[0].prompt_id == ok.prompt_id
        updates = [e for e in seen if isinstance(e, SessionUpdateEvent)]
        assert "".join(u.text or "" for u in updates if u.kind == "agent_message_chunk") == "hi there"
        assert "".join(u.text or "" for u in updates if u.kind == "agent_thought_chunk") == "hmm"
        complete = next(e for e in seen if isinstance(e, TurnCompleteEvent))
        assert (complete.prompt_id, complete.stop_reason, complete.event) == (ok.prompt_id, "end_turn", "turn_complete")
        error = seen[-1]
        assert isinstance(error, TurnErrorEvent)
        assert (error.code, error.data["retryable"]) == ("model_http_error", False)
        assert {e.session_id for e in seen} == {session_id}
        assert [e.id for e in seen] == list(range(seen[0].id, seen[0].id + len(seen)))
        assert events.last_event_id == seen[-1].id


async def test_a_cut_stream_reconnects_with_last_event_id_and_loses_nothing() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        rec = Recorder()
        async with DaemonClient(served.url, transport=rec) as client:
            session_id = await client.create_session("/tmp")
            model.enqueue(SlowDrip(interval_s=0.005, text=" ".join(WORDS)))
            async with client.events(session_id) as events:
                rec.cut_events('w3"', reconnect="forward")
                result = await client.prompt(session_id, "hello")
                seen = await until(events, lambda e: isinstance(e, TurnCompleteEvent))
            assert rec.cut.is_set()
            assert rec.last_event_ids[:1] == [None] and len(rec.last_event_ids) >= 3  # ours, the prompt's, reconnect
            cut_at = next(e.id for e in seen if isinstance(e, SessionUpdateEvent) and (e.text or "").strip() == "w3")
            assert str(cut_at) in rec.last_event_ids  # resumed right after the last event read
            assert [e.id for e in seen] == list(range(seen[0].id, seen[0].id + len(seen)))
            text = [e.text for e in seen if isinstance(e, SessionUpdateEvent) and e.kind == "agent_message_chunk"]
            assert [t.strip() for t in text if t] == WORDS
            assert result.stop_reason == "end_turn"


async def test_resync_required_is_yielded_then_live_events_follow() -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, event_ring_size=4) as served,
        DaemonClient(served.url) as client,
    ):
        session_id = await client.create_session("/tmp")
        await client.prompt(session_id, "hello")  # returns once its turn_complete is published
        latest = served.last_event_id(session_id)
        async with client.events(session_id, last_event_id=1) as events:
            resync = await anext(events)
            assert isinstance(resync, ResyncRequiredEvent)
            assert (resync.id, resync.last_event_id, resync.oldest_event_id, resync.latest_event_id) == (
                latest,
                1,
                latest - 3,
                latest,
            )
            assert events.last_event_id == latest
            await client.prompt(session_id, "again", wait=True)
            live = await anext(events)
            assert isinstance(live, PromptAcceptedEvent) and live.id == latest + 1


async def test_the_stream_ends_after_session_closed() -> None:
    async with running_daemon(None) as served, DaemonClient(served.url) as client:
        session_id = await client.create_session("/tmp")
        async with client.events(session_id) as events:
            await client.close_session(session_id)
            seen = [event async for event in events]
        assert [type(e) for e in seen] == [SessionClosedEvent]
        assert events.closed
        assert [e async for e in events] == []


async def test_unknown_session_and_closed_client() -> None:
    async with running_daemon(None) as served:
        client = DaemonClient(served.url)
        with pytest.raises(DaemonSessionNotFoundError):
            async with client.events("nope"):
                pass  # pragma: no cover
        session_id = await client.create_session("/tmp")
        async with client.events(session_id) as events, anyio.create_task_group() as tg:

            async def read() -> None:
                with pytest.raises(DaemonClientClosedError):
                    await anext(events)

            tg.start_soon(read)
            await anyio.wait_all_tasks_blocked()  # the read is pending
            await client.aclose()
        with pytest.raises(DaemonClientClosedError):
            client.events(session_id)
