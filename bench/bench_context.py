"""The context layer's cost and effect: what a request build costs as the stored history grows, and how big what is
sent stays over a long session.

1. **Build** (in process): the turn's view of a history of 0, 100 and 1,000 stored messages — the chat messages
   (``ContextView.messages``) and their budget estimate (``messages_tokens``, what the compaction check reads
   before each request) — uncompacted, and compacted (a summary of all but the last 4 messages). Target: at 1,000
   messages within 5 ms of 0 (both ways).
2. **Size** (in process, real HTTP): ``ModelTurn`` behind a ``SessionBridge`` on a SQLite store, against the offline
   model with a 4,000-token window that refuses anything larger (OpenAI's 400 ``context_length_exceeded``), 100
   turns of ~100 tokens each way. Printed: per 10 turns, the largest request the model counted and the largest
   estimate; the refusals; the compactions. Target: every turn ``end_turn``, no refusal, each request under the
   80 % threshold (3,200 tokens by the model's count).

Run: ``python bench/bench_context.py [--turns 100]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from acp_server.bridge import SessionBridge
from acp_server.domain import Compaction, Conversation, Message, Prompt, PromptEnded, TextPart
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, Behaviour, LoopbackModel
from acp_server.provider.offline._wire import count_prompt_words
from acp_server.store import SqliteSessionStore
from acp_server.turn import ModelSettings, ModelTurn
from acp_server.turn.context import ContextView, messages_tokens

SIZES = (0, 100, 1000)
SYSTEM = "You are a helpful coding assistant working in the user's project at /work."
WINDOW = 4000


def words(n: int, seed: int) -> str:
    """``n`` three-letter words: one token each for the offline model (it counts words) and for the estimate."""
    return " ".join(f"w{(seed * 7 + i) % 100:02d}" for i in range(n))


def is_summary_request(body: dict[str, Any]) -> bool:
    first = body["messages"][0].get("content")
    return isinstance(first, str) and "You are compacting" in first


def summaries(body: dict[str, Any]) -> Behaviour | None:
    return Answer(text="Goal: numbered words. State: going on.", reasoning="") if is_summary_request(body) else None


def history(n: int, compacted: bool) -> Conversation:
    answer = " ".join(f"w{w}" for w in range(60))
    messages = [
        Message("user", " ".join(f"p{i}-{w}" for w in range(40))) if i % 2 == 0 else Message("assistant", answer)
        for i in range(n)
    ]
    compaction = Compaction(n - 4, "summary " * 200) if compacted and n > 4 else None
    return Conversation(messages, compaction)


def best_ms(fn: Any, rounds: int = 100) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def build_figures() -> bool:
    ok = True
    for compacted in (False, True):
        figures = {}
        for n in SIZES:
            view = ContextView(SYSTEM, history(n, compacted), "the new prompt")
            figures[n] = best_ms(lambda view=view: messages_tokens(view.messages()))
        label = "compacted" if compacted else "uncompacted"
        shown = ", ".join(f"{n} messages {ms:.3f} ms" for n, ms in figures.items())
        delta = figures[1000] - figures[0]
        passed = delta <= 5.0
        ok &= passed
        print(f"build ({label}): {shown}; 1000 - 0 = {delta:.3f} ms (target <= 5 ms) {'OK' if passed else 'FAIL'}")
    return ok


async def size_figures(turns: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        async with LoopbackModel() as model, SqliteSessionStore(Path(tmp) / "sessions.db") as store:
            model.context_window, model.answer_with = WINDOW, summaries
            policy = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
            turn = ModelTurn(ModelSettings(base_url=model.base_url, model="m", context_window=WINDOW, policy=policy))
            async with SessionBridge(turn, store=store) as bridge:
                ok = await _long_session(model, store, bridge, tmp, turns)
            await turn.aclose()
            return ok


async def _long_session(
    model: LoopbackModel, store: SqliteSessionStore, bridge: SessionBridge, cwd: str, turns: int
) -> bool:
    session = await bridge.open_session(cwd)
    ended = []
    for i in range(turns):
        handle = bridge.send_prompt(session.session_id, Prompt((TextPart(words(100, i)),)))
        last = [event async for event in handle.events][-1]
        assert isinstance(last, PromptEnded)
        ended.append(last.stop_reason)
    chats = [r.body for r in model.requests if not is_summary_request(r.body)]
    counted = [count_prompt_words(body) for body in chats]
    estimated = [messages_tokens(body["messages"]) for body in chats]
    per = max(1, len(chats) // max(1, turns // 10))
    for start in range(0, len(chats), per):
        end = start + per
        print(
            f"  requests {start + 1:>3}-{min(end, len(chats)):>3}: largest counted by the model "
            f"{max(counted[start:end]):>5}, largest estimate (messages) {max(estimated[start:end]):>5}"
        )
    summaries = sum(1 for r in model.requests if is_summary_request(r.body))
    snapshot = await store.read_session(session.session_id)
    assert snapshot is not None
    limit = WINDOW * 80 // 100
    ok = all(e == "end_turn" for e in ended) and not model.refusals and max(counted) <= limit
    print(
        f"size: {turns} turns, {len(snapshot.messages)} messages stored, {summaries} compactions, "
        f"{len(model.refusals)} refusals, largest request {max(counted)} tokens (target <= {limit}, "
        f"all end_turn) {'OK' if ok else 'FAIL'}"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    print(f"$ python bench/bench_context.py --turns {args.turns}")
    ok = build_figures()
    ok &= anyio.run(size_figures, args.turns)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
