"""Admission under flood, over real pipes: 10,000 pipelined ``session/prompt`` requests on one session while the
first is running. Reports accepted/refused counts, refusal latency (send → reply, p50/p99) and RSS growth; then the
RSS cost of 1,000 idle sessions.

Run: ``python bench/bench_queue.py [--prompts 10000] [--sessions 1000]``.
Targets: exactly ``limit`` (5) accepted, every refusal answered, p99 ≤ 1 ms, RSS growth ≤ 5 MB; idle sessions
≤ 60 MB over baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import anyio
from _pipe import spawn
from _proc import rss_kib

from acp_server.provider.offline import Answer, LoopbackModel


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(prompts: int, sessions: int) -> None:
    async with LoopbackModel() as model:
        model.enqueue(*(Answer(text="slow " * 50, reasoning="", chunk_delay_s=0.2) for _ in range(5)))
        async with spawn("--base-url", model.base_url, "--model", "m") as agent:
            pid = agent.process.pid
            session_id = await agent.new_session()

            base = rss_kib(pid)
            for i in range(sessions):
                new = {"cwd": "/tmp", "mcpServers": []}
                await agent.send({"jsonrpc": "2.0", "id": f"n{i}", "method": "session/new", "params": new})
            await agent.reply(f"n{sessions - 1}")
            sessions_mb = (rss_kib(pid) - base) / 1024

            def prompt_message(msg_id: Any) -> dict[str, Any]:
                params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
                return {"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt", "params": params}

            for i in range(5):  # fill the queue: one running, four waiting
                await agent.send(prompt_message(f"p{i}"))
            await model.wait_for_requests(1)

            round_trips: list[float] = []
            for i in range(1000):
                started = time.perf_counter()
                await agent.send(prompt_message(-1 - i))
                answer = await agent.reply(-1 - i)
                round_trips.append(time.perf_counter() - started)
                assert answer["error"]["data"]["errorKind"] == "prompt_queue_full", answer

            rss_before = rss_kib(pid)
            refused = accepted = 0
            started = time.perf_counter()

            async def flood() -> None:
                for first in range(0, prompts, 100):
                    batch = range(first, min(prompts, first + 100))
                    await agent.send_raw(b"".join(json.dumps(prompt_message(i)).encode() + b"\n" for i in batch))

            async with anyio.create_task_group() as tg:
                tg.start_soon(flood)
                async for message in agent.messages():
                    if "method" in message or not isinstance(message.get("id"), int):
                        continue
                    if "error" in message and message["error"]["data"]["errorKind"] == "prompt_queue_full":
                        refused += 1
                    else:
                        accepted += 1
                    if refused + accepted == prompts:
                        break
            elapsed = time.perf_counter() - started
            rss_after = rss_kib(pid)

    p50, p99 = statistics.median(round_trips) * 1e3, percentile(round_trips, 0.99) * 1e3
    print(f"command: python bench/bench_queue.py --prompts {prompts} --sessions {sessions}")
    print(f"{sessions} idle sessions: RSS +{sessions_mb:.1f} MB over baseline (target <= 60 MB)")
    print(f"refusal round trip (one at a time, queue full, 1000 samples): p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print("  (target p99 <= 1 ms)")
    print(f"flood: {prompts} pipelined prompts, queue full -> {accepted} more accepted, {refused} refused,")
    print(f"  all answered in {elapsed:.2f} s ({prompts / elapsed:,.0f} refusals/s)")
    print(f"RSS growth during the flood: {(rss_after - rss_before) / 1024:.1f} MB (target <= 5 MB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    anyio.run(main, args.prompts, args.sessions)
