"""Relay rate of one long answer, in characters per second: the endpoint → the agent → ``agent_message_chunk`` lines
on its stdout → a reader, versus the raw openai SDK consuming the same stream from the same endpoint.

Three processes for the relay, as in production: the endpoint (``bench/_model_server.py``, the loopback model),
the agent (``acp-server``), the reader (this script). The baseline is a fourth process of its own: the openai SDK
(``chat.completions.create(stream=True)``, its per-chunk objects) reading the same answer from the same endpoint.
Each side is warmed (imports, connection) before it is timed. Target: relay ≥ 1.5× the raw SDK.

Run: ``python bench/bench_relay.py [--chunks 5000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import anyio
from _endpoint import model_process
from _pipe import AgentPipe, spawn

RAW = "raw"


async def raw_client(base_url: str, runs: int) -> None:
    """The baseline, in its own process: prints one ``chars seconds`` line per timed run."""
    from acp_server.provider import make_openai_client

    client = make_openai_client(base_url=base_url, api_key=None)
    for run in range(runs + 1):  # the first run warms the client (imports, platform detection, connection)
        started = time.perf_counter()
        chars = 0
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                chars += len(chunk.choices[0].delta.content)
        if run:
            print(chars, time.perf_counter() - started, flush=True)
    await client.close()


async def raw_rates(base_url: str, runs: int) -> list[float]:
    command = [sys.executable, __file__, RAW, base_url, str(runs)]
    result = await anyio.run_process(command, stderr=None)
    rates = []
    for line in result.stdout.decode().splitlines():
        chars, seconds = line.split()
        rates.append(int(chars) / float(seconds))
    return rates


async def relay_rates(base_url: str, runs: int, expected_chars: int) -> list[float]:
    rates = []
    async with spawn("--base-url", base_url, "--model", "m") as agent:
        for run in range(runs + 1):  # the first run warms the agent (its SDK client, the connection)
            session_id = await agent.new_session() if run == 0 else await new_session(agent, run)
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
            started = time.perf_counter()
            await agent.send({"jsonrpc": "2.0", "id": f"p{run}", "method": "session/prompt", "params": prompt})
            chars = 0
            async for message in agent.messages():
                if message.get("id") == f"p{run}":
                    break
                update = message["params"]["update"]
                if update["sessionUpdate"] == "agent_message_chunk":
                    chars += len(update["content"]["text"])
            elapsed = time.perf_counter() - started
            assert chars == expected_chars, (chars, expected_chars)
            if run:
                rates.append(chars / elapsed)
    return rates


async def new_session(agent: AgentPipe, run: int) -> str:
    reply = await agent.call(f"new{run}", "session/new", {"cwd": "/tmp", "mcpServers": []})
    return str(reply["result"]["sessionId"])


async def main(chunks: int, runs: int, repeat: int) -> None:
    expected = len(" ".join(f"w{i}" for i in range(chunks)))
    print(f"command: python bench/bench_relay.py --chunks {chunks} --runs {runs} --repeat {repeat}")
    print("target: relay >= 1.5x the raw openai SDK, in characters/s (endpoint, agent, reader, baseline: 4 processes)")
    async with model_process("--words", str(chunks)) as model:
        for round_ in range(1, repeat + 1):
            raw = await raw_rates(model.base_url, runs)
            relay = await relay_rates(model.base_url, runs, expected)
            raw_median, relay_median = statistics.median(raw), statistics.median(relay)
            ratio = relay_median / raw_median
            per_chunk = chunks / expected
            print(f"round {round_}:")
            for name, median, rates in (
                ("raw openai SDK, own process", raw_median, raw),
                ("relay", relay_median, relay),
            ):
                each = ", ".join(f"{r:,.0f}" for r in rates)
                print(f"  {name:28} {median:,.0f} chars/s = {median * per_chunk:,.0f} chunks/s (median of: {each})")
            verdict = "met" if ratio >= 1.5 else "MISSED"
            print(f"  ratio relay / raw:           {ratio:.2f}x (target >= 1.5x): {verdict}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == RAW:
        anyio.run(raw_client, sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    anyio.run(main, args.chunks, args.runs, args.repeat)
