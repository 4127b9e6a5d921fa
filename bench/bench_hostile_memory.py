"""Memory of the stdio agent under two hostile clients, each in its own process (the agent is spawned; this script
is the client); the agent's resident memory is read from ``/proc/<pid>/status``.

1. **A client that writes and never reads**: requests whose answers are twice their size, written as fast as the
   pipe takes them, stdout never read. The agent stops reading while its answers wait: its memory stays flat
   however much the client tries to send. Target: RSS growth <= 50 MB.
2. **A long prompt deadline**: ``--prompt-deadline-ms 3600000``; per round a new session, one large prompt, then
   ``session/close``. A settled prompt is forgotten at once, not kept until its deadline. Target: RSS with the
   deadline <= 1.1x RSS without it.

Run: ``python bench/bench_hostile_memory.py [--rounds 300] [--prompt-kb 100]``.
"""

from __future__ import annotations

import argparse
import json
import time

import anyio
from _pipe import AgentPipe, spawn
from _proc import rss_mb

RERUN = "python bench/bench_hostile_memory.py"


async def flood_without_reading(seconds: float) -> tuple[float, float, int]:
    """RSS before and after ``seconds`` of writing, and how many bytes the agent accepted."""
    method = "x" * 20_000  # answered -32601 with the method echoed in message and data
    async with spawn() as agent:
        pid = agent.process.pid
        await agent.new_session()  # the schema and the model client are loaded: what follows is the flood's
        before = rss_mb(pid)
        sent = 0
        deadline = time.monotonic() + seconds
        line = json.dumps({"jsonrpc": "2.0", "id": 0, "method": method}).encode() + b"\n"
        with anyio.move_on_after(seconds):
            while time.monotonic() < deadline:
                await agent.send_raw(line)  # blocks once the agent stops reading
                sent += len(line)
        after = rss_mb(pid)
        agent.process.kill()  # its answers are never read: no clean shutdown to wait for
    return before, after, sent


async def long_deadline_rounds(deadline_ms: int | None, rounds: int, prompt_kb: int) -> float:
    args = ("--offline",) if deadline_ms is None else ("--offline", "--prompt-deadline-ms", str(deadline_ms))
    text = "y" * (prompt_kb * 1024)
    async with spawn(*args) as agent:
        await agent.call(1, "initialize", {"protocolVersion": 1})
        for i in range(rounds):
            session = await _new(agent, i)
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
            reply = await agent.call(f"p{i}", "session/prompt", prompt)
            assert reply["result"]["stopReason"] == "end_turn", reply
            await agent.call(f"c{i}", "session/close", {"sessionId": session})
        return rss_mb(agent.process.pid)


async def _new(agent: AgentPipe, i: int) -> str:
    reply = await agent.call(f"n{i}", "session/new", {"cwd": "/tmp", "mcpServers": []})
    return str(reply["result"]["sessionId"])


async def main(rounds: int, prompt_kb: int) -> None:
    print(f"# {RERUN} --rounds {rounds} --prompt-kb {prompt_kb}")
    before, after, sent = await flood_without_reading(5.0)
    growth = after - before
    print(
        f"[no reader]     wrote {sent / 1e6:.1f} MB in 5 s (the agent stopped reading), "
        f"RSS {before:.0f} -> {after:.0f} MB, growth {growth:.1f} MB (target <= 50) {'ok' if growth <= 50 else 'MISS'}"
    )
    without = await long_deadline_rounds(None, rounds, prompt_kb)
    with_deadline = await long_deadline_rounds(3_600_000, rounds, prompt_kb)
    ratio = with_deadline / without
    print(
        f"[long deadline] {rounds} x {prompt_kb} KB prompts, each session closed: RSS {without:.0f} MB without a "
        f"deadline, {with_deadline:.0f} MB with 1 h: {ratio:.2f}x (target <= 1.1x) {'ok' if ratio <= 1.1 else 'MISS'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--prompt-kb", type=int, default=100)
    options = parser.parse_args()
    anyio.run(main, options.rounds, options.prompt_kb)
