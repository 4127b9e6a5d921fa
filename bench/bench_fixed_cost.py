"""The fixed cost of a turn: what a fresh session's first request carries before the user has said anything — the
system prompt and the offered tools' schemas — in characters of ``messages`` + ``tools`` JSON, per mode and per
tool. On a local model with a 4,096-token window this is the room left for the work.

In process, real HTTP: ``ModelTurn`` behind a ``SessionBridge`` (in-memory store) against the offline model, in an
empty temporary directory (no AGENTS.md, not a git repository), one one-word prompt per mode; the request the model
received is measured as sent (compact JSON, UTF-8 as is). Target: ≤ 6,000 characters in ``default`` mode.

Run: ``python bench/bench_fixed_cost.py``.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import anyio

from acp_server.bridge import SessionBridge
from acp_server.domain import Prompt, PromptEnded, TextPart
from acp_server.modes import DEFAULT_MODE, MODES
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.turn import ModelSettings, ModelTurn

TARGET_CHARS = 6000


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


async def _first_requests(cwd: str) -> dict[str, dict[str, Any]]:
    bodies: dict[str, dict[str, Any]] = {}
    async with LoopbackModel() as model:
        policy = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
        turn = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=policy))
        async with SessionBridge(turn) as bridge:
            for mode in MODES:
                model.enqueue(Answer(text="ok"))
                session = await bridge.open_session(cwd, mode=mode)
                handle = bridge.send_prompt(session.session_id, Prompt((TextPart("hi"),)))
                last = [event async for event in handle.events][-1]
                assert isinstance(last, PromptEnded), last
                bodies[mode] = model.requests[-1].body
        await turn.aclose()
    return bodies


async def main() -> None:
    print("command: python bench/bench_fixed_cost.py")
    with tempfile.TemporaryDirectory() as cwd:
        bodies = await _first_requests(cwd)
    for mode, body in bodies.items():
        system = body["messages"][0]["content"]
        messages, tools = _chars(body["messages"]), _chars(body.get("tools", []))
        print(
            f"{mode:<20} messages {messages:>5} (system prompt {len(system):>5})   tools {tools:>5} "
            f"({len(body.get('tools', []))} tools)   total {messages + tools:>5}"
        )
    print("per tool (its entry in tools):")
    for entry in bodies[DEFAULT_MODE].get("tools", []):
        function = entry["function"]
        print(
            f"  {function['name']:<16} {_chars(entry):>5}   (description {len(function['description']):>4}, "
            f"parameters {_chars(function['parameters']):>5})"
        )
    default = bodies[DEFAULT_MODE]
    total = _chars(default["messages"]) + _chars(default.get("tools", []))
    verdict = "OK" if total <= TARGET_CHARS else "MISSED"
    print(f"default mode: {total} characters (target <= {TARGET_CHARS}): {verdict}")


if __name__ == "__main__":
    anyio.run(main)
