"""Coalescing for REST SSE subscribers: a subscriber slower than the model gets a prompt's text pieces that waited
together in its queue as one frame (the id of the last), and one frame per event when it keeps up.

The event log itself first (no network), then the real daemon: a paused reader over real sockets.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from acp_server.daemon import Accepted, EventLog
from acp_server.domain import Prompt
from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip

from ._support import Event, running_daemon

pytestmark = pytest.mark.anyio


def parse(frame: bytes) -> tuple[int, str, dict[str, Any]]:
    """(id, event, data) of one encoded frame."""
    lines = dict(line.split(": ", 1) for line in frame.decode().strip().split("\n"))
    return int(lines["id"]), lines["event"], json.loads(lines["data"])


def piece_data(kind: str) -> Any:
    return lambda text: {"update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}


MESSAGE = piece_data("agent_message_chunk")
THOUGHT = piece_data("agent_thought_chunk")


def text_of(data: dict[str, Any]) -> str:
    text: str = data["update"]["content"]["text"]
    return text


async def test_pieces_waiting_for_a_busy_reader_merge_into_one_frame_with_the_last_id() -> None:
    log = EventLog("s", ring_size=100, queue_size=10)
    reader = log.subscribe()  # never waiting yet: it is busy elsewhere (sending)
    words = [f" w{i}" for i in range(20)]
    ids = [log.publish_text("session_update", ("p", "message"), word, MESSAGE) for word in words]
    frames = await reader.receive()
    assert frames is not None
    [(frame_id, event, data)] = [parse(frame) for frame in frames]
    assert (frame_id, event, text_of(data)) == (ids[-1], "session_update", "".join(words))
    # the ring keeps one frame per event: a reconnect replays each, exactly after the id it names
    replay = await log.subscribe(ids[4]).receive()
    assert replay is not None
    assert [parse(f)[0] for f in replay] == ids[5:]
    assert "".join(text_of(parse(f)[2]) for f in replay) == "".join(words[5:])
    after_merged = log.subscribe(frame_id)  # the id of a merged frame: nothing after it is missing, or repeated
    assert not after_merged.ready()
    later = log.publish_text("session_update", ("p", "message"), " more", MESSAGE)
    assert [parse(f)[0] for f in await after_merged.receive() or []] == [later]


async def test_a_reader_that_keeps_up_gets_one_frame_per_piece() -> None:
    log = EventLog("s", ring_size=100, queue_size=10)
    reader = log.subscribe()
    got: list[tuple[int, str, dict[str, Any]]] = []
    waiting = anyio.Event()

    async def read() -> None:
        nonlocal waiting
        while True:
            waiting.set()
            frames = await reader.receive()
            if frames is None:
                return
            got.extend(parse(frame) for frame in frames)
            waiting = anyio.Event()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        ids = []
        for i in range(5):
            await waiting.wait()
            await anyio.wait_all_tasks_blocked()  # the reader waits in receive()
            ids.append(log.publish_text("session_update", ("p", "message"), f" w{i}", MESSAGE))
            # woken, not yet run: what comes before it runs is not merged (it keeps up)
            ids.append(log.publish_text("session_update", ("p", "message"), f" x{i}", MESSAGE))
        await anyio.wait_all_tasks_blocked()
        log.close()
    assert [frame_id for frame_id, _, _ in got] == ids
    assert [text_of(data) for _, _, data in got] == [w for i in range(5) for w in (f" w{i}", f" x{i}")]


async def test_only_consecutive_pieces_of_one_text_merge_and_order_is_kept() -> None:
    log = EventLog("s", ring_size=100, queue_size=20)
    reader = log.subscribe()
    log.publish_text("session_update", ("p", "thought"), "think ", THOUGHT)
    log.publish_text("session_update", ("p", "thought"), "more", THOUGHT)
    log.publish_text("session_update", ("p", "message"), "Hello", MESSAGE)  # another kind: a new frame
    log.publish_text("session_update", ("p", "message"), " there", MESSAGE)
    log.publish("tool_call", {"update": {"sessionUpdate": "tool_call"}})  # another event: ends the merging
    log.publish_text("session_update", ("p", "message"), " after", MESSAGE)
    log.publish_text("session_update", ("q", "message"), "next prompt", MESSAGE)  # another prompt's text
    log.publish_text("other_event", ("q", "message"), "!", MESSAGE)  # same key, another event name
    frames = await reader.receive()
    assert frames is not None
    got = [parse(frame) for frame in frames]
    assert [(i, e) for i, e, _ in got] == [
        (2, "session_update"),
        (4, "session_update"),
        (5, "tool_call"),
        (6, "session_update"),
        (7, "session_update"),
        (8, "other_event"),
    ]
    texts = [text_of(data) if e != "tool_call" else None for _, e, data in got]
    assert texts == ["think more", "Hello there", None, " after", "next prompt", "!"]
    assert got[0][2]["update"]["sessionUpdate"] == "agent_thought_chunk"


async def test_a_merged_frame_holds_at_most_coalesce_chars_of_text() -> None:
    log = EventLog("s", ring_size=1000, queue_size=100, coalesce_chars=100)
    reader = log.subscribe()
    pieces = ["x" * 30] * 10 + ["y" * 150, "z" * 10]  # a piece larger than the cap is sent alone
    for piece in pieces:
        log.publish_text("session_update", ("p", "message"), piece, MESSAGE)
    frames = await reader.receive()
    assert frames is not None
    texts = [text_of(parse(frame)[2]) for frame in frames]
    assert [len(t) for t in texts] == [90, 90, 90, 30, 150, 10]
    assert "".join(texts) == "".join(pieces)
    assert [parse(frame)[0] for frame in frames] == [3, 6, 9, 10, 11, 12]


async def test_merging_makes_a_lagging_reader_drop_later_and_memory_stays_bounded() -> None:
    log = EventLog("s", ring_size=100, queue_size=3, coalesce_chars=1000)
    merged = log.subscribe()
    for _ in range(2000):  # one character each: 1,000 a frame, in few strings
        log.publish_text("session_update", ("p", "message"), "a", MESSAGE)
    assert not merged.dropped and merged.queued == 2
    entry = merged._queue[-1]
    assert len(entry.parts) <= 64  # type: ignore[union-attr]
    for i in range(2):  # a queue of 3 entries still counts entries: events that cannot merge fill it
        log.publish("e", {"i": i})
    assert merged.dropped and merged.queued == 0
    assert await merged.receive() is None


# -- the daemon: a paused reader over real sockets -------------------------------------------------------------

WORD_BYTES = 1024
WORDS = 12_288  # 12 MiB: more than the sockets between the daemon and the paused reader hold


def chunk_text(event: Event) -> str:
    assert event.event == "session_update" and event.data["update"]["sessionUpdate"] == "agent_message_chunk"
    return text_of(event.data)


@pytest.mark.e2e
async def test_a_paused_sse_reader_gets_fewer_larger_frames_and_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [("" if i == 0 else " ") + f"w{i:05d}".ljust(WORD_BYTES - 1, "x") for i in range(WORDS)]
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="".join(words), reasoning=""))
        # a paused reader that is never dropped: room for every entry and every byte of the answer
        lag = {"subscriber_queue_size": 4096, "subscriber_queue_bytes": 2 * WORDS * WORD_BYTES}
        async with running_daemon(model, event_ring_size=WORDS + 16, **lag) as served:
            daemon = served.daemon
            accepted: list[Accepted] = []
            submit = daemon.submit_prompt

            def capture_prompt(session_id: str, prompt: Prompt, *, deadline_ms: int | None = None) -> Accepted:
                accepted.append(submit(session_id, prompt, deadline_ms=deadline_ms))
                return accepted[-1]

            monkeypatch.setattr(daemon, "submit_prompt", capture_prompt)
            session_id = await served.new_session()
            log = daemon.event_log(session_id)
            async with served.events(session_id) as reader:  # not read until the turn has ended: paused
                assert (await served.prompt(session_id, "go")).status_code == 202
                with anyio.fail_after(30):
                    assert await accepted[0].handle.result() == "end_turn"
                await anyio.wait_all_tasks_blocked()  # the pump has published the rest
                [subscription] = list(log._subscribers)
                assert not subscription.dropped
                seen = await reader.until(lambda e: e.event == "turn_complete", timeout=30)
            first_id = accepted[0].event_id
            assert seen[0].event == "prompt_accepted" and seen[0].id == first_id
            chunks = seen[1:-2]
            assert "".join(chunk_text(e) for e in chunks) == "".join(words)  # nothing dropped, nothing reordered
            assert len(chunks) < WORDS  # fewer, larger frames: those that waited merged up to the cap (8 words)
            assert max(len(chunk_text(e)) for e in chunks) == 8 * WORD_BYTES == 8192
            assert [e.event for e in seen[-2:]] == ["session_update", "turn_complete"]  # the usage, the end
            assert seen[-1].id == log.last_id
            # each frame carries the id of the last event it holds: the ring's events after the one before it
            ring = log.subscribe(first_id)
            replayed = [parse(frame) for frame in await ring.receive() or []]
            ring.close()
            assert [i for i, _, _ in replayed] == list(range(first_id + 1, log.last_id + 1))  # one per event
            text_at = {i: text_of(data) for i, _, data in replayed if "content" in data.get("update", {})}
            previous = first_id
            for event in chunks:
                assert event.id > previous
                assert "".join(text_at[i] for i in range(previous + 1, event.id + 1)) == chunk_text(event)
                previous = event.id
            # a reconnect with the id of a merged frame gets exactly what came after it
            middle = next(i for i, e in enumerate(chunks) if i > len(chunks) // 2 and e.id - chunks[i - 1].id > 1)
            async with served.events(session_id, chunks[middle].id) as again:
                rest = await again.until(lambda e: e.event == "turn_complete", timeout=30)
            assert [e.id for e in rest] == list(range(chunks[middle].id + 1, log.last_id + 1))
            assert "".join(chunk_text(e) for e in rest[:-2]) == "".join(chunk_text(e) for e in chunks[middle + 1 :])


@pytest.mark.e2e
async def test_an_sse_reader_that_keeps_up_gets_one_frame_per_chunk() -> None:
    words = [f"w{i}" for i in range(30)]
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.005, text=" ".join(words)))
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as reader:
                accepted = await served.prompt(session_id)
                seen = await reader.until(lambda e: e.event == "turn_complete", timeout=10)
    first = accepted.json()["lastEventId"]
    assert [e.id for e in seen] == list(range(first, first + len(seen)))  # one frame per event
    assert [chunk_text(e).strip() for e in seen[1:-1] if e.data.get("update", {}).get("content")] == words
