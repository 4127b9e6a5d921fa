"""Cost of MCP servers in the agent: one MCP tool round over stdio next to a built-in ``read_file`` round, and
``session/new`` with 0, 1 and 5 stdio servers.

The agent (``acp-server --no-persist``) is a real process; this script is its client (raw NDJSON over its pipes) and
runs the loopback model in process. The MCP server is ``bench/_mcp_echo_server.py`` (plain JSON-RPC lines, a
read-only ``echo`` tool), so the figures are the agent's and its MCP client's, not an SDK server's.

1. **Tool round**: a prompt of ``--rounds`` answers that each call one tool, then an answer; per round, the prompt's
   wall time divided by its rounds, for ``read_file`` (a small file of a temp project) and ``mcp__bench__echo``,
   interleaved, ``--runs`` prompts each after a warm-up. Reported: the median per round of each, and the added
   latency of an MCP round (median MCP − median read_file). Target: ≤ 5 ms added.
2. **session/new**: ``session/new`` → its answer, with 0, 1 and 5 servers that each take ``--delay`` s to answer
   ``initialize`` (median of ``--samples``). Servers connect in parallel: target 5 servers ≤ 1.5 × 1 server (in
   series it would be 5 ×).

Run: ``python bench/bench_mcp.py [--runs 5] [--rounds 20] [--samples 5] [--delay 1.0]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _pipe import AgentPipe, spawn

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

ECHO_SERVER = str(Path(__file__).resolve().parent / "_mcp_echo_server.py")
ROUND_TARGET_MS = 5.0
PARALLEL_TARGET = 1.5


def server(name: str, delay: float = 0.0) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [ECHO_SERVER, "--delay", str(delay)], "env": []}


async def new_session(agent: AgentPipe, tag: str, cwd: str, servers: list[dict[str, Any]]) -> tuple[str, float]:
    started = time.perf_counter()
    reply = await agent.call(tag, "session/new", {"cwd": cwd, "mcpServers": servers})
    elapsed = time.perf_counter() - started
    states = reply["result"].get("_meta", {}).get("acpServer", {}).get("mcpServers", [])
    assert all(state["status"] == "connected" for state in states), states
    return str(reply["result"]["sessionId"]), elapsed


async def tool_prompt(
    agent: AgentPipe, model: LoopbackModel, session_id: str, tag: str, call: ScriptedCall, rounds: int
) -> float:
    """One prompt of ``rounds`` calls of ``call`` and an answer; its wall time per round, ms."""
    model.enqueue(*(ToolCalls((call,)) for _ in range(rounds)), Answer(text="done"))
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    started = time.perf_counter()
    await agent.send({"jsonrpc": "2.0", "id": tag, "method": "session/prompt", "params": params})
    completed = 0
    async for message in agent.messages():
        if message.get("id") == tag and "method" not in message:
            assert message["result"]["stopReason"] == "end_turn", message
            break
        update = message["params"]["update"]
        if update["sessionUpdate"] == "tool_call_update" and update.get("status") == "completed":
            completed += 1
    elapsed = time.perf_counter() - started
    assert completed == rounds, (completed, rounds)
    return elapsed * 1000 / rounds


async def main(runs: int, rounds: int, samples: int, delay: float) -> None:
    print(f"$ python bench/bench_mcp.py --runs {runs} --rounds {rounds} --samples {samples} --delay {delay}")
    project = Path(tempfile.mkdtemp(prefix="acp-bench-mcp-"))
    (project / "notes.txt").write_text("a small file\n" * 20)
    async with LoopbackModel() as model, spawn("--base-url", model.base_url, "--model", "m", "--no-persist") as agent:
        await agent.call("init", "initialize", {"protocolVersion": 1})
        session_id, _ = await new_session(agent, "s0", str(project), [server("bench")])
        read = ScriptedCall("read_file", {"path": "notes.txt"})
        echo = ScriptedCall("mcp__bench__echo", {"text": "hello"})
        await tool_prompt(agent, model, session_id, "warm-r", read, rounds)
        await tool_prompt(agent, model, session_id, "warm-m", echo, rounds)
        read_ms, mcp_ms = [], []
        for run in range(runs):
            read_ms.append(await tool_prompt(agent, model, session_id, f"r{run}", read, rounds))
            mcp_ms.append(await tool_prompt(agent, model, session_id, f"m{run}", echo, rounds))
        r, m = statistics.median(read_ms), statistics.median(mcp_ms)
        added = m - r
        print(f"tool round (median of {runs} prompts x {rounds} rounds): read_file {r:.2f} ms, MCP echo {m:.2f} ms")
        verdict = "PASS" if added <= ROUND_TARGET_MS else "FAIL"
        print(f"  added latency of an MCP round over stdio: {added:.2f} ms (target <= {ROUND_TARGET_MS} ms) {verdict}")

        times: dict[int, float] = {}
        for count in (0, 1, 5):
            elapsed = []
            for i in range(samples):
                servers = [server(f"s{k}", delay) for k in range(count)]
                sid, seconds = await new_session(agent, f"n{count}-{i}", str(project), servers)
                elapsed.append(seconds)
                await agent.call(f"c{count}-{i}", "session/close", {"sessionId": sid})
            times[count] = statistics.median(elapsed)
            print(
                f"session/new with {count} stdio servers ({delay} s to initialize each): {times[count] * 1000:.0f} ms"
            )
        ratio = times[5] / times[1]
        verdict = "PASS" if ratio <= PARALLEL_TARGET else "FAIL"
        print(f"  5 servers / 1 server: {ratio:.2f}x (target <= {PARALLEL_TARGET}x; in series: 5x) {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--delay", type=float, default=1.0)
    args = parser.parse_args()
    anyio.run(main, args.runs, args.rounds, args.samples, args.delay)
