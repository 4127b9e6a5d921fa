"""Relay rate: loopback model → ``agent_message_chunk`` lines on the agent's stdout, versus the raw openai SDK
consuming the same stream. Target: relay ≥ 0.8× the raw SDK rate.

Run: ``python bench/bench_relay.py [--chunks 5000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import anyio
from _pipe import spawn

from acp_server.provider import make_openai_client
from acp_server.provider.offline import Answer, LoopbackModel


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
    async with spawn("--base-url", model.base_url, "--model", "m") as agent:
        session_id = await agent.new_session()
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
        model.enqueue(Answer(text="warm up", reasoning=""))
        await agent.call("warm", "session/prompt", prompt)
        model.enqueue(Answer(text=text, reasoning=""))
        started = time.perf_counter()
        await agent.send({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt})
        count = 0
        async for message in agent.messages():
            if message.get("id") == "p":
                break
            if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
                count += 1
        elapsed = time.perf_counter() - started
        assert count == words, (count, words)
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
