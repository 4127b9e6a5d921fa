"""A session's channel (``SessionChannel``) publishes each event of its prompts in the task that sends it, the
instant it is sent — no task of its own per session — and in admission order: a later prompt's events wait in its
stream until the earlier prompt has ended, then come all at once, in order."""

from __future__ import annotations

import anyio
import pytest

from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.daemon import EventLog
from acp_server.daemon.rest import SessionChannel
from acp_server.domain import Emit, Prompt, StopReason, TextChunk, TextPart

pytestmark = pytest.mark.anyio


async def test_each_event_is_published_as_its_turn_sends_it_and_prompts_keep_their_admission_order() -> None:
    channels: dict[str, SessionChannel] = {}
    seen: list[tuple[str, int]] = []  # (chunk, the log's last id right after the turn's emit returned)
    first_sent, first_may_end = anyio.Event(), anyio.Event()

    async def runner(session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        log = channels[session.session_id].log
        for i in range(3):
            await emit(TextChunk(f"{prompt.title}/{i}"))
            seen.append((f"{prompt.title}/{i}", log.last_id))
        if prompt.title == "first":
            first_sent.set()
            await first_may_end.wait()
        return "end_turn"

    async with SessionBridge(runner) as bridge:
        session = await bridge.open_session("/tmp")
        log = EventLog(session.session_id, ring_size=64, queue_size=64)
        channel = channels[session.session_id] = SessionChannel(session.session_id, log)
        for title in ("first", "second"):
            channel.accept(bridge.send_prompt(session.session_id, Prompt((TextPart(title),))))
        with anyio.fail_after(10):
            await first_sent.wait()
            assert seen == [("first/0", 1), ("first/1", 2), ("first/2", 3)]  # published within the send, no task
            first_may_end.set()
            await channel.drained()
        assert not channel.pending
        frames = [frame.decode() for _, frame in channel.log._ring]  # one per event, in order
    names = [frame.split("\n")[1] for frame in frames]
    assert names == ["event: session_update"] * 3 + ["event: turn_complete"] + ["event: session_update"] * 3 + [
        "event: turn_complete"
    ]
    chunks = ["first/0", "first/1", "first/2", "second/0", "second/1", "second/2"]
    assert [next(c for c in chunks if f'"{c}"' in frame) for frame in frames if "session_update" in frame] == chunks
