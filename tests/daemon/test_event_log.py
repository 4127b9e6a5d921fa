"""The per-session SSE stream: ids, replay with Last-Event-ID, resync, heartbeats, bounded subscribers, session end."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from acp_server.config import Settings
from acp_server.daemon import EventLog, RingBudget
from acp_server.daemon._sse_frames import encode_frame
from acp_server.provider.offline import HangAfterHeaders, LoopbackModel, SlowDrip

from ._support import Event, assert_documented, running_daemon

pytestmark = pytest.mark.anyio  # the plain (non-async) tests below are not marked by it

WORDS = [f"w{i}" for i in range(30)]


def message_text(events: list[Event]) -> str:
    return "".join(
        e.data["update"]["content"]["text"]
        for e in events
        if e.event == "session_update" and e.data["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_reconnect_with_last_event_id_mid_turn_loses_no_event() -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.01, text=" ".join(WORDS)))
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as witness:  # stays connected the whole time
                accepted = await served.prompt(session_id)
                assert accepted.status_code == 202
                last_event_id = accepted.json()["lastEventId"]
                async with served.events(session_id, last_event_id) as first:
                    before = await first.until(lambda e: "w3" in message_text([e]))
                # disconnected mid-turn: events go on without us
                async with served.events(session_id, before[-1].id) as second:
                    after = await second.until(lambda e: e.event == "turn_complete")
                everything = await witness.until(lambda e: e.event == "turn_complete")
        resumed = before + after
        assert [e.id for e in resumed] == list(range(last_event_id + 1, last_event_id + 1 + len(resumed)))
        assert resumed == everything[1:]  # the witness also saw prompt_accepted
        assert message_text(resumed).split() == WORDS


async def test_a_stale_last_event_id_gets_resync_required_then_live_events() -> None:
    async with LoopbackModel() as model, running_daemon(model, event_ring_size=4) as served:
        session_id = await served.new_session()
        response = await served.prompt(session_id, wait="true")
        assert response.status_code == 200
        log = served.daemon.event_log(session_id)
        latest = log.last_id
        assert latest > 4 and log.oldest_id == latest - 3
        async with served.events(session_id, latest - 4) as events:  # all still in the ring: plain replay
            assert [(await events.next()).id for _ in range(4)] == [latest - 3, latest - 2, latest - 1, latest]
        async with served.events(session_id, latest + 1000) as events:  # an id this daemon never issued
            assert (await events.next()).event == "resync_required"
        async with served.events(session_id, 1) as events:
            resync = await events.next()
            assert resync.event == "resync_required"
            assert resync.id == latest
            assert resync.data == {
                "sessionId": session_id,
                "lastEventId": 1,
                "oldestEventId": latest - 3,
                "latestEventId": latest,
            }
            await served.prompt(session_id)
            live = await events.next()
            assert (live.event, live.id) == ("prompt_accepted", latest + 1)


async def test_an_idle_stream_gets_heartbeat_comments() -> None:
    async with running_daemon(None, heartbeat_s=0.05) as served:
        session_id = await served.new_session()
        async with served.client.stream("GET", f"/session/{session_id}/events") as response:
            lines = response.aiter_lines()
            with anyio.fail_after(5):
                assert await lines.__anext__() == ": keep-alive"
                assert await lines.__anext__() == ""
                assert await lines.__anext__() == ": keep-alive"


async def test_deleting_a_session_ends_its_prompts_and_its_streams() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                running = (await served.prompt(session_id)).json()["promptId"]
                waiting = (await served.prompt(session_id)).json()["promptId"]
                await model.wait_for_requests(1)
                deleted = await served.client.delete(f"/session/{session_id}")
                assert deleted.status_code == 204
                assert_documented("DELETE", "/session/{sessionId}", deleted)
                seen = await events.until_ended()
            assert seen[-1].event == "session_closed"
            errors = {e.data["promptId"]: e.data for e in seen if e.event == "turn_error"}
            assert set(errors) == {running, waiting}
            assert {e["code"] for e in errors.values()} == {"session_closed"}
            again = await served.client.delete(f"/session/{session_id}")  # stored, detached: idempotent
            assert again.status_code == 204
            unknown = await served.client.delete("/session/never-was")
            assert unknown.status_code == 404 and unknown.json()["code"] == "session_not_found"
            assert_documented("DELETE", "/session/{sessionId}", unknown)
            gone = await served.client.get(f"/session/{session_id}/events")
            assert gone.status_code == 404
            assert_documented("GET", "/session/{sessionId}/events", gone)


async def test_bad_last_event_id_is_400() -> None:
    async with running_daemon(None) as served:
        session_id = await served.new_session()
        response = await served.client.get(f"/session/{session_id}/events", headers={"Last-Event-ID": "abc"})
        assert response.status_code == 400
        assert_documented("GET", "/session/{sessionId}/events", response)
        assert response.json()["details"] == [{"field": "Last-Event-ID", "message": "not an event id"}]


# -- the event log itself (no network) ----------------------------------------------------------------------------


async def test_a_subscriber_that_falls_behind_is_dropped_and_the_others_are_not() -> None:
    log = EventLog("s", ring_size=100, queue_size=3)
    slow = log.subscribe()
    fast = log.subscribe()
    for i in range(3):
        log.publish("e", {"i": i})
    assert len(await fast.receive() or []) == 3
    log.publish("e", {"i": 3})  # slow now holds 3: one more and it is out
    assert slow.dropped and slow.dropped_event.is_set()
    assert await slow.receive() is None
    assert log.subscriber_count == 1
    assert len(await fast.receive() or []) == 1
    for i in range(1000):  # memory stays bounded: the dropped one holds nothing, the ring keeps 100
        log.publish("e", {"i": i})
        await fast.receive()
    assert log.oldest_id == log.last_id - 99


async def test_subscribe_replays_then_goes_live_with_no_gap_and_no_repeat() -> None:
    log = EventLog("s", ring_size=10, queue_size=10)
    for i in range(5):
        log.publish("e", {"i": i})
    subscription = log.subscribe(2)
    log.publish("e", {"i": 5})
    frames = await subscription.receive()
    assert frames is not None
    assert [int(f.split(b"\n", 1)[0].split(b": ")[1]) for f in frames] == [3, 4, 5, 6]
    log.close()
    assert await subscription.receive() is None


async def test_a_nudge_ends_only_a_waiting_receive_with_no_frames() -> None:
    log = EventLog("s", ring_size=10, queue_size=10)
    subscription = log.subscribe()
    subscription.nudge()  # none waits: nothing happens (the next receive waits for a frame)
    got: list[list[bytes] | None] = []

    async def receive() -> None:
        got.append(await subscription.receive())

    async with anyio.create_task_group() as tg:
        tg.start_soon(receive)
        await anyio.wait_all_tasks_blocked()
        assert got == []
        subscription.nudge()
    assert got == [[]]  # the writer's cue for a heartbeat
    log.publish("e", {"i": 0})
    assert len(await subscription.receive() or []) == 1


async def test_replay_is_not_held_to_the_live_cap() -> None:
    log = EventLog("s", ring_size=50, queue_size=2)
    for i in range(40):
        log.publish("e", {"i": i})
    subscription = log.subscribe(0)
    log.publish("e", {"i": 40})
    assert not subscription.dropped
    assert len(await subscription.receive() or []) == 41


# -- ids across attachments, and every close path ------------------------------------------------------------------


async def test_event_ids_never_repeat_across_a_close_and_a_resume() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        session_id = await served.new_session()
        async with served.events(session_id) as events:
            first = (await served.prompt(session_id, wait="true")).json()
            assert first["stopReason"] == "end_turn"
            assert (await served.client.delete(f"/session/{session_id}")).status_code == 204
            before = await events.until_ended()
        assert before[-1].event == "session_closed"
        assert (await served.client.post(f"/session/{session_id}/resume", json={})).status_code == 200
        accepted = (await served.prompt(session_id)).json()
        assert accepted["lastEventId"] > before[-1].id  # the new attachment starts above every earlier id
        # An id of the previous attachment names an event that is gone: resync, never a silent splice.
        async with served.events(session_id, before[2].id) as stale:
            resync = await stale.next()
            assert resync.event == "resync_required"
            assert resync.data["lastEventId"] == before[2].id
        # A reader that saw the previous attachment's last event misses nothing of the new one.
        async with served.events(session_id, before[-1].id) as caught_up:
            after = await caught_up.until(lambda e: e.event == "turn_complete")
        assert after[0].event == "prompt_accepted" and after[0].id == accepted["lastEventId"]
        assert [e.id for e in after] == list(range(after[0].id, after[0].id + len(after)))


async def test_event_ids_never_repeat_across_a_daemon_restart(tmp_path: Path) -> None:
    settings = Settings(state_dir=str(tmp_path))
    async with LoopbackModel() as model:
        async with running_daemon(model, settings=settings) as served:
            session_id = await served.new_session()
            assert (await served.prompt(session_id, wait="true")).status_code == 200
            last_before = served.daemon.event_log(session_id).last_id
        async with running_daemon(model, settings=settings) as served:
            assert (await served.client.post(f"/session/{session_id}/resume", json={})).status_code == 200
            accepted = (await served.prompt(session_id)).json()
            assert accepted["lastEventId"] > last_before
            async with served.events(session_id, last_before) as events:  # not this daemon's: resync
                assert (await events.next()).event == "resync_required"


@pytest.mark.parametrize("method", ["session/close", "session/delete"])
async def test_a_session_closed_through_acp_ends_its_rest_streams_with_session_closed(method: str) -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                running = (await served.prompt(session_id)).json()["promptId"]
                await model.wait_for_requests(1)
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
                connection = (await served.client.post("/acp", json=init)).headers["Acp-Connection-Id"]
                headers = {"Acp-Connection-Id": connection, "Acp-Session-Id": session_id}
                params = {"sessionId": session_id, "cwd": "/tmp"}
                resume = {"jsonrpc": "2.0", "id": 2, "method": "session/resume", "params": params}
                close = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"sessionId": session_id}}
                # the session becomes known to the connection (resume), then /acp closes it: 202, answer on its stream
                assert (await served.client.post("/acp", json=resume, headers=headers)).status_code == 202
                async with served.client.stream(
                    "GET", "/acp", headers={**headers, "accept": "text/event-stream"}
                ) as stream:
                    assert (await served.client.post("/acp", json=close, headers=headers)).status_code == 202
                    sse = httpx2.EventSource(stream).__aiter__()
                    answer = json.loads((await sse.__anext__()).data)
                    assert answer == {"jsonrpc": "2.0", "id": 3, "result": {}}, answer
                    with pytest.raises(StopAsyncIteration):  # the session's stream ends after the answer
                        await sse.__anext__()
                seen = await events.until_ended()
            stored = await served.bridge.store.get_session(session_id)
            assert (stored is None) == (method == "session/delete")  # only a delete removes the history
        assert [e.event for e in seen[-2:]] == ["turn_error", "session_closed"]
        assert seen[-2].data["promptId"] == running and seen[-2].data["code"] == "session_closed"


async def test_a_session_closed_by_another_face_of_the_bridge_ends_its_rest_streams() -> None:
    async with running_daemon(None) as served:
        session_id = await served.new_session()
        async with served.events(session_id) as events:
            await served.bridge.close_session(session_id)  # what the stdio face does
            seen = await events.until_ended()
        assert [e.event for e in seen] == ["session_closed"]
        assert (await served.client.get(f"/session/{session_id}/events")).status_code == 404


# -- the rings' total budget (no network) ------------------------------------------------------------------------


def test_idle_rings_are_bounded_in_total_and_the_least_recently_active_give_first() -> None:
    budget = RingBudget(64 * 1024)
    logs = [EventLog(f"s{i}", ring_size=5000, queue_size=10, budget=budget) for i in range(300)]
    for log in logs:
        for i in range(100):
            log.publish("e", {"i": i, "pad": "x" * 200})
        assert budget.used <= budget.max_bytes
    assert budget.used == sum(log.ring_bytes for log in logs)
    assert logs[-1].oldest_id == 1  # the most recent one kept everything (100 frames fit)
    assert logs[0].oldest_id == logs[0].last_id + 1  # the idle ones gave their frames back
    stale = logs[0].subscribe(5)  # its events are gone: resync_required, never a silent gap
    assert logs[0].subscribe(logs[0].last_id)._replay == []  # caught up: nothing to say
    first = stale._replay[0]
    assert b"event: resync_required" in first
    logs[-1].close()  # a closed log gives its ring back
    assert budget.used == sum(log.ring_bytes for log in logs[:-1])


def test_a_frame_larger_than_the_budget_is_kept_alone() -> None:
    budget = RingBudget(1000)
    log = EventLog("s", ring_size=10, queue_size=10, budget=budget)
    log.publish("e", {"pad": "x" * 5000})
    assert log.oldest_id == log.last_id and budget.used > budget.max_bytes
    log.publish("e", {"i": 1})
    assert log.oldest_id == log.last_id and budget.used <= budget.max_bytes


def test_a_log_starting_after_a_previous_attachment_replays_to_a_reader_of_its_last_id() -> None:
    log = EventLog("s", ring_size=3, queue_size=10, first_id=1000, previous_id=41)
    for i in range(3):
        log.publish("e", {"i": i})
    assert len(log.subscribe(41)._replay) == 3  # saw the previous attachment's end: everything after it
    assert len(log.subscribe(0)._replay) == 3  # 0 = all of this attachment
    for bad in (40, 42, 999, 2000):
        assert b"resync_required" in log.subscribe(bad)._replay[0]
    log.publish("e", {"i": 3})  # evicts 1000: the previous attachment's end is no longer adjacent
    assert b"resync_required" in log.subscribe(41)._replay[0]
    assert b"resync_required" in log.subscribe(0)._replay[0]
    assert len(log.subscribe(1000)._replay) == 3


async def test_the_daemon_bounds_all_rings_together() -> None:
    async with LoopbackModel() as model, running_daemon(model, event_ring_total_bytes=32 * 1024) as served:
        sessions = [await served.new_session() for _ in range(6)]
        for session_id in sessions:
            assert (await served.prompt(session_id, " ".join(WORDS), wait="true")).status_code == 200
        budget = served.daemon.ring_budget
        assert 0 < budget.used <= 32 * 1024
        assert budget.used == sum(served.daemon.event_log(s).ring_bytes for s in sessions)
        newest, oldest = served.daemon.event_log(sessions[-1]), served.daemon.event_log(sessions[0])
        assert newest.oldest_id == newest.first_id  # the active session kept its history...
        assert oldest.oldest_id == oldest.last_id + 1  # ... the idle ones gave theirs back
        assert newest.ring_bytes < 32 * 1024 * 3 / 4  # one prompt's chunks, each with its messageId


@pytest.mark.parametrize(
    "text",
    ["", "plain words ", 'a "quote" and a \\ backslash', "\n\r\t\x00\x1f\x7f", "é 日本 \U0001f600", "lone \ud800 half"],
)
@pytest.mark.parametrize("session_id", ["s-1", "s-\ue000acp-server text\ue001"])
def test_a_text_piece_is_framed_as_encode_frame_frames_its_data(text: str, session_id: str) -> None:
    """Pieces are framed around their text's JSON alone; the bytes are those of the whole data encoded."""
    log = EventLog(session_id, ring_size=16, queue_size=16)

    def data(piece: str) -> dict[str, object]:
        return {"promptId": "p", "sessionId": session_id, "update": {"content": {"type": "text", "text": piece}}}

    expected = []
    for piece in (text, text + "!", text):
        event_id = log.publish_text("session_update", ("p", "message"), piece, data)
        expected.append(encode_frame("session_update", data(piece), event_id))
    assert [frame for _, frame in log._ring] == expected
    assert log.subscribe(0)._replay == expected  # the replay too
