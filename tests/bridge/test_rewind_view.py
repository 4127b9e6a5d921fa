"""What the model sees after a rewind: the rewound turns are out of the history a turn gets, and a compaction made
of that view is stored through the real seq (and read back as the view's count); one that summarised rewound turns
is set aside."""

from __future__ import annotations

import pytest

from acp_server.bridge import SessionEntry
from acp_server.domain import Compaction, Conversation, Message, Prompt, TextPart
from acp_server.store import MemorySessionStore, Rewind

pytestmark = pytest.mark.anyio


async def _turn(session: SessionEntry, text: str) -> Conversation:
    history = await session.begin_turn(Prompt((TextPart(text),)), Message("user", text))
    await session.end_turn(Message("assistant", f"re: {text}", "", "end_turn", "complete"))
    return history


async def test_the_model_sees_no_rewound_turn_and_compactions_map_to_seqs() -> None:
    async with MemorySessionStore() as store:
        await store.create_session("s", "/w")
        session = SessionEntry("s", "/w", Conversation(), journal=store)
        for text in ("one", "two", "three"):
            await _turn(session, text)
        await session.record_compaction(Compaction(4, "one and two"))  # before the rewind: through turn two
        assert await session.rewind_conversation(3) == Rewind(3, 6)
        history = await _turn(session, "four")
        assert [m.content for m in history.messages] == ["one", "re: one"]
        assert history.compaction is None  # it summarised turn two, which is rewound: set aside
        await session.record_compaction(Compaction(4, "one and four"))  # the view's 4th message is seq 8
        snapshot = await store.read_session("s")
        assert snapshot is not None and snapshot.compaction == Compaction(8, "one and four")
        assert snapshot.rewinds == (Rewind(3, 6),)
        history = await _turn(session, "five")
        assert [m.content for m in history.messages] == ["one", "re: one", "four", "re: four"]
        assert history.compaction == Compaction(4, "one and four")  # counted in the view
        assert [seq for seq, _ in session.prompt_seqs()] == [1, 7, 9]
