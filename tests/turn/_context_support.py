"""A bridge over a real store with ``ModelTurn`` against the offline model whose window is small: what the long
session tests drive. Words of three letters make the model's count (words) and the estimate (4 characters a
token) agree, so a test that passes without compaction cannot exist."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_server.bridge import SessionBridge
from acp_server.domain import Prompt, PromptEnded, PromptEvent, TextPart
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, Behaviour, LoopbackModel
from acp_server.store import SessionStore, SqliteSessionStore
from acp_server.turn import ModelSettings, ModelTurn

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
WINDOW = 4000
SUMMARY = "Goal: keep the session going. Files: none. State: the user sends numbered words."


def words(n: int, seed: int = 0) -> str:
    """``n`` three-letter words (one token each, for the model and for the estimate)."""
    return " ".join(f"w{(seed * 7 + i) % 100:02d}" for i in range(n))


def is_summary_request(body: dict[str, Any]) -> bool:
    first = body["messages"][0]
    return isinstance(first.get("content"), str) and "You are compacting" in first["content"]


def summarising(summary: Behaviour | None = None) -> Any:
    """An ``answer_with`` that answers summary requests with ``summary`` (a short one by default)."""
    chosen = summary if summary is not None else Answer(text=SUMMARY, reasoning="")

    def answer_with(body: dict[str, Any]) -> Behaviour | None:
        return chosen if is_summary_request(body) else None

    return answer_with


@dataclass
class Outcome:
    events: list[PromptEvent]

    @property
    def ended(self) -> PromptEnded:
        last = self.events[-1]
        assert isinstance(last, PromptEnded)
        return last


async def ask(bridge: SessionBridge, session_id: str, text: str) -> Outcome:
    handle = bridge.send_prompt(session_id, Prompt((TextPart(text),)))
    return Outcome([event async for event in handle.events])


@asynccontextmanager
async def long_session_stack(
    tmp_path: Path,
    *,
    known_window: bool = True,
    threshold: int = 80,
    model_window: int = WINDOW,
    system_prompt: str | None = "You answer the user's numbered words.",
    **settings_: Any,
) -> AsyncIterator[tuple[LoopbackModel, SessionStore, SessionBridge]]:
    """``system_prompt`` None: the server's own; ``settings_``: further :class:`ModelSettings` fields."""
    async with LoopbackModel() as model, SqliteSessionStore(tmp_path / "state" / "sessions.db") as store:
        model.context_window = model_window
        model.answer_with = summarising()
        settings = ModelSettings(
            base_url=model.base_url,
            model="test-model",
            policy=NO_RETRIES,
            context_window=model_window if known_window else None,
            compact_threshold=threshold,
            project_instructions=False,
            **({} if system_prompt is None else {"system_prompt": system_prompt}),  # short: the room is the turns'
            **settings_,
        )
        turn = ModelTurn(settings)
        try:
            async with SessionBridge(turn, store=store, models=turn.models) as bridge:
                yield model, store, bridge
        finally:
            await turn.aclose()
