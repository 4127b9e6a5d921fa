"""Relay rate: loopback model → ``agent_message_chunk`` lines on the agent's stdout, versus the raw openai SDK
consuming the same stream. Target: relay ≥ 0.8× the raw SDK rate.

Run: ``python bench/bench_relay.py [--chunks 5000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import anyio

from acp_server.provider import make_openai_client
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.rpc import iter_lines


async def raw_rate(model: LoopbackModel, text: str) -> float:
    client = make_openai_client(base_url=model.base_url, api_key=None)
    await client.models.list()  # warm the client (platform detection runs once, in a thread)
    model.enqueue(Answer(text=text, reasoning=""))
    started = time.perf_counter()
    chunks = 0
    stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
    elapsed = time.perf_counter() - started
    await client.close()
    return chunks / elapsed


async def relay_rate(model: LoopbackModel, text: str, words: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    command = [sys.executable, "-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--log-level", "ERROR"]
    async with await anyio.open_process(command, env=env, stderr=None) as process:
        assert process.stdin is not None and process.stdout is not None
        stdout = process.stdout

        async def receive() -> bytes:
            try:
                return await stdout.receive()
            except anyio.EndOfStream:
                return b""

        lines = iter_lines(receive, 1 << 30)

        async def call(msg_id: str, method: str, params: dict[str, object]) -> tuple[dict[str, object], int, float]:
            assert process.stdin is not None
            await process.stdin.send(
                json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode() + b"\n"
            )
            count, first = 0, 0.0
            async for line in lines:
                assert isinstance(line, bytes)
                message = json.loads(line)
                if message.get("method") == "session/update":
                    if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
                        count += 1
                        first = first or time.perf_counter()
                elif message.get("id") == msg_id:
                    return message, count, first
            raise RuntimeError("agent exited")

        await call("i", "initialize", {"protocolVersion": 1})
        session = (await call("s", "session/new", {"cwd": "/tmp", "mcpServers": []}))[0]["result"]
        session_id = session["sessionId"]  # type: ignore[index]
        model.enqueue(Answer(text="warm up", reasoning=""))
        await call("w", "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]})
        model.enqueue(Answer(text=text, reasoning=""))
        started = time.perf_counter()
        _, count, _ = await call(
            "p", "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
        )
        elapsed = time.perf_counter() - started
        assert count == words, (count, words)
        await process.stdin.aclose()
        await process.wait()
        return count / elapsed


async def main(chunks: int, runs: int) -> None:
    text = " ".join(f"w{i}" for i in range(chunks))
    raw: list[float] = []
    relay: list[float] = []
    async with LoopbackModel() as model:
        for _ in range(runs):
            raw.append(await raw_rate(model, text))
            relay.append(await relay_rate(model, text, chunks))
    raw_median, relay_median = statistics.median(raw), statistics.median(relay)
    print(f"command: python bench/bench_relay.py --chunks {chunks} --runs {runs}")
    print(f"raw SDK consumption:        {raw_median:,.0f} chunks/s (median of {runs})")
    print(f"relay to ACP stdout lines:  {relay_median:,.0f} chunks/s (median of {runs})")
    print(f"ratio relay / raw:          {relay_median / raw_median:.2f}x (target >= 0.8x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.chunks, args.runs)
