"""What a prompt of huge MCP results costs the stdio agent: memory while it runs, the store after it, and the turns
and ``session/load`` that follow — each beside the same prompt of built-in ``read_file`` calls.

One prompt of ``--calls`` tool calls (one model step) of an MCP tool answering ``--mb`` MB of text each (a stdio
server of plain JSON-RPC lines), against one of as many ``run_command`` calls printing as much (a built-in tool whose
output the editor is shown). An MCP result is capped like a built-in tool's output (64 KiB and a note) for the
model, the editor and the store alike.
Targets: the agent's peak RSS during the MCP prompt <= ``--calls`` x ``--mb`` MB above its RSS before it (a message
is held only while it is read, parsed and capped; nothing of it is kept); the store grows by at most 1.5x
what the built-in prompt added; the next one-line turn and ``session/load`` take at most 1.5x (+ 20 ms) their time
after the built-in prompt.

Run: ``python bench/bench_mcp_memory.py [--calls 16] [--mb 10]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _pipe import AgentPipe, spawn
from _proc import rss_mb

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

BYPASS = ("--default-mode", "bypass-permissions", "--allow-bypass-permissions")
SERVER = str(Path(__file__).resolve().parent / "_mcp_echo_server.py")


async def prompt(agent: AgentPipe, session_id: str, tag: str, text: str) -> float:
    """One prompt's wall time, s (its updates read and dropped)."""
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    started = time.perf_counter()
    await agent.send({"jsonrpc": "2.0", "id": tag, "method": "session/prompt", "params": params})
    async for message in agent.messages():
        if message.get("id") == tag and "method" not in message:
            assert message["result"]["stopReason"] == "end_turn", message
            break
    return time.perf_counter() - started


async def load(agent: AgentPipe, session_id: str, tag: str, cwd: str) -> tuple[float, int]:
    """``session/load``'s wall time (s) and the bytes of its replay."""
    import json

    params = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
    started = time.perf_counter()
    await agent.send({"jsonrpc": "2.0", "id": tag, "method": "session/load", "params": params})
    size = 0
    async for message in agent.messages():
        if message.get("id") == tag and "method" not in message:
            break
        size += len(json.dumps(message))
    return time.perf_counter() - started, size


def db_size(state: Path) -> int:
    return sum(path.stat().st_size for path in state.glob("sessions.db*"))


async def one_kind(
    agent: AgentPipe, model: LoopbackModel, state: Path, cwd: str, tag: str, call: ScriptedCall, calls: int
) -> dict[str, Any]:
    servers = [{"name": "bench", "command": sys.executable, "args": [SERVER], "env": []}]
    reply = await agent.call(f"{tag}-new", "session/new", {"cwd": cwd, "mcpServers": servers})
    session_id = str(reply["result"]["sessionId"])
    pid = agent.process.pid
    before, db_before, peak = rss_mb(pid), db_size(state), 0.0
    model.enqueue(ToolCalls(tuple(ScriptedCall(call.name, call.arguments, id=f"{tag}{i}") for i in range(calls))))
    model.enqueue(Answer(text="done"))
    async with anyio.create_task_group() as tg:

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_mb(pid))
                await anyio.sleep(0.005)

        tg.start_soon(sample)
        await prompt(agent, session_id, f"{tag}-p", "go")
        tg.cancel_scope.cancel()
    grown = db_size(state) - db_before
    model.enqueue(Answer(text="short"))
    turn = await prompt(agent, session_id, f"{tag}-t", "one line")
    loaded, replay = await load(agent, session_id, f"{tag}-l", cwd)
    return {"rss": before, "peak": peak, "db": grown, "turn": turn, "load": loaded, "replay": replay}


async def main(calls: int, mb: int) -> None:
    print(f"$ python bench/bench_mcp_memory.py --calls {calls} --mb {mb}")
    project = Path(tempfile.mkdtemp(prefix="acp-bench-mcp-memory-"))
    state = Path(tempfile.mkdtemp(prefix="acp-bench-state-"))
    flags = ("--base-url", "--model", "m", "--state-dir", str(state), "--mcp-call-timeout-ms", "600000", *BYPASS)
    async with LoopbackModel() as model:
        args = (flags[0], model.base_url, *flags[1:])
        async with spawn(*args) as agent:
            await agent.call("init", "initialize", {"protocolVersion": 1})
            command = f"head -c {mb * 1024 * 1024} /dev/zero | tr '\\0' x"
            run = ScriptedCall("run_command", {"command": command})
            built = await one_kind(agent, model, state, str(project), "r", run, calls)
            big = ScriptedCall("mcp__bench__big", {"size": mb * 1024 * 1024})
            mcp = await one_kind(agent, model, state, str(project), "m", big, calls)
    for name, figures in ((f"run_command {mb} MB", built), (f"MCP {mb} MB", mcp)):
        print(
            f"{calls} x {name}: RSS {figures['rss']:.0f} MB before, peak {figures['peak']:.0f} MB; store +"
            f"{figures['db'] / 1024:.0f} KiB; next one-line turn {figures['turn'] * 1000:.0f} ms; session/load "
            f"{figures['load'] * 1000:.0f} ms ({figures['replay'] / 1024:.0f} KiB replayed)"
        )
    growth, bound = mcp["peak"] - mcp["rss"], calls * mb
    print(f"  peak RSS growth {growth:.0f} MB (target <= {bound} MB) {'PASS' if growth <= bound else 'FAIL'}")
    ratio = mcp["db"] / max(built["db"], 1)
    print(f"  store growth {ratio:.2f}x the built-in prompt's (target <= 1.5x) {'PASS' if ratio <= 1.5 else 'FAIL'}")
    for key, what in (("turn", "one-line turn"), ("load", "session/load")):
        ok = mcp[key] <= 1.5 * built[key] + 0.02
        print(
            f"  {what} {mcp[key] * 1000:.0f} ms vs {built[key] * 1000:.0f} ms (target <= 1.5x + 20 ms) "
            f"{'PASS' if ok else 'FAIL'}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=16)
    parser.add_argument("--mb", type=int, default=10)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.mb)
