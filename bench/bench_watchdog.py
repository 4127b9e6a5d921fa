"""Watchdog benchmarks (a script, not a test): per-chunk overhead and stall-detection latency.

Rerun: ``. .venv/bin/activate && python bench/bench_watchdog.py`` (``--help`` for sizes).

1. In memory: iterate an in-memory chunk stream raw, then through the watchdog (``guard_stream``, idle and
   lifetime armed), interleaved, ``--reps`` times; the per-chunk difference is the watchdog's cost (target
   <= 1 µs). Passthrough (both timers off) is shown for reference.
2. Real SDK over loopback: one ``AsyncStream`` of ``--sdk-chunks`` chunks from the offline model, consumed raw
   and through the watchdog, in pairs of alternating order; median of the pair ratios (target <= 1.03x).
3. Stall detection: the model answers 200 then stays silent; ``stream_chat`` with a ``--idle-ms`` idle timeout
   (no retry). Latency = when the endpoint sees the disconnect - when it received the request - idle
   (target: median <= 10 ms).

Runs on asyncio (production) and, for 1, on trio too. Figures vary with machine load (shown first).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio

from acp_server.pipeline import ChatRequest, StreamPolicy, stream_chat
from acp_server.pipeline._watchdog import guarded_stream
from acp_server.provider import make_openai_client
from acp_server.provider.offline import Answer, HangAfterHeaders, LoopbackModel

RERUN = "python bench/bench_watchdog.py"


def guard_stream(stream: Any, *, idle_timeout_ms: float, max_lifetime_ms: float = 0) -> Any:
    """The watchdog over an already open stream (its clocks start at the first iteration)."""

    async def ready() -> Any:
        return stream

    return guarded_stream(ready, idle_timeout_ms=idle_timeout_ms, max_lifetime_ms=max_lifetime_ms)


class MemoryStream:
    """An in-memory stand-in for ``openai.AsyncStream``: ``n`` ready chunks, no I/O, ``close()``."""

    def __init__(self, n: int) -> None:
        self._left = n
        self._chunk = object()

    def __aiter__(self) -> MemoryStream:
        return self

    async def __anext__(self) -> object:
        if self._left <= 0:
            raise StopAsyncIteration
        self._left -= 1
        return self._chunk

    async def close(self) -> None:
        pass


async def _timed(make: Callable[[], Awaitable[int]]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        await make()
        return time.perf_counter() - start
    finally:
        gc.enable()


async def _raw(stream: Any) -> int:
    n = 0
    async for _ in stream:
        n += 1
    return n


async def _guarded(stream: Any, idle_ms: float, lifetime_ms: float) -> int:
    n = 0
    async with aclosing(guard_stream(stream, idle_timeout_ms=idle_ms, max_lifetime_ms=lifetime_ms)) as chunks:
        async for _ in chunks:
            n += 1
    return n


async def bench_memory(chunks: int, reps: int) -> dict[str, float]:
    raw, guarded, passthrough = [], [], []
    for _ in range(reps):
        raw.append(await _timed(lambda: _raw(MemoryStream(chunks))))
        guarded.append(await _timed(lambda: _guarded(MemoryStream(chunks), 120_000, 900_000)))
        passthrough.append(await _timed(lambda: _guarded(MemoryStream(chunks), 0, 0)))
    ns = 1e9 / chunks
    diffs = [(g - r) * ns for g, r in zip(guarded, raw, strict=True)]
    return {
        "raw_ns": statistics.median(raw) * ns,
        "guarded_ns": statistics.median(guarded) * ns,
        "passthrough_ns": statistics.median(passthrough) * ns,
        "overhead_ns_median": statistics.median(diffs),
        "overhead_ns_min": min(g * ns for g in guarded) - min(r * ns for r in raw),
    }


async def bench_sdk(chunks: int, reps: int) -> dict[str, float]:
    text = " ".join(f"w{i}" for i in range(chunks))
    request = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    raw, guarded = [], []
    async with LoopbackModel() as model, make_openai_client(base_url=model.base_url, api_key=None) as client:

        async def one(guard: bool) -> int:
            model.enqueue(Answer(text=text, reasoning=""))
            stream = await client.chat.completions.create(**request)  # type: ignore[call-overload]
            if guard:
                return await _guarded(stream, 120_000, 900_000)
            try:
                return await _raw(stream)
            finally:
                await stream.close()

        await one(False)  # warm the connection pool
        for i in range(reps):  # pairs, in alternating order so that load drift cancels out
            for guard in (False, True) if i % 2 == 0 else (True, False):
                (guarded if guard else raw).append(await _timed(lambda guard=guard: one(guard)))
    n = chunks + 1  # + the finish chunk
    return {
        "raw_us": statistics.median(raw) * 1e6 / n,
        "guarded_us": statistics.median(guarded) * 1e6 / n,
        "ratio": statistics.median(g / r for g, r in zip(guarded, raw, strict=True)),
        "ratio_of_medians": statistics.median(guarded) / statistics.median(raw),
        "ratio_of_best": min(guarded) / min(raw),
    }


async def bench_stall(idle_ms: float, runs: int) -> dict[str, float]:
    request = ChatRequest(model="m", messages=[{"role": "user", "content": "x"}])
    policy = StreamPolicy(idle_timeout_ms=idle_ms, stream_max_retries=0)
    latencies = []
    async with LoopbackModel() as model, make_openai_client(base_url=model.base_url, api_key=None) as client:
        for i in range(runs):
            model.enqueue(HangAfterHeaders())
            try:
                async with aclosing(stream_chat(client, request, policy)) as events:
                    async for _ in events:
                        pass
            except Exception:
                pass
            disconnect = (await model.wait_for_disconnects(i + 1))[i]
            latencies.append((disconnect.at - model.requests[i].received_at) * 1000 - idle_ms)
    return {
        "median_ms": statistics.median(latencies),
        "p90_ms": sorted(latencies)[int(0.9 * (len(latencies) - 1))],
        "max_ms": max(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--chunks", type=int, default=200_000, help="in-memory chunks per run (default 200000)")
    add("--reps", type=int, default=9, help="interleaved repetitions (default 9)")
    add("--sdk-chunks", type=int, default=1_000, help="chunks per SDK stream (default 1000)")
    add("--sdk-reps", type=int, default=30, help="SDK stream pairs (default 30)")
    add("--idle-ms", type=float, default=200, help="idle timeout of the stall runs (default 200)")
    add("--stall-runs", type=int, default=20, help="stall runs (default 20)")
    args = parser.parse_args()

    load = os.getloadavg()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f}")
    print(f"rerun: {RERUN} --chunks {args.chunks} --reps {args.reps} --sdk-chunks {args.sdk_chunks}")
    print()
    for backend in ("asyncio", "trio"):
        m = anyio.run(bench_memory, args.chunks, args.reps, backend=backend)
        verdict = "ok" if m["overhead_ns_median"] <= 1000 else "OVER TARGET"
        print(
            f"[memory/{backend}] {args.chunks} chunks x {args.reps}: raw {m['raw_ns']:.0f} ns/chunk, "
            f"guarded {m['guarded_ns']:.0f} ns/chunk, passthrough {m['passthrough_ns']:.0f} ns/chunk"
        )
        print(
            f"[memory/{backend}] watchdog overhead: median {m['overhead_ns_median']:.0f} ns/chunk, "
            f"best-vs-best {m['overhead_ns_min']:.0f} ns/chunk (target <= 1000) {verdict}"
        )
    s = anyio.run(bench_sdk, args.sdk_chunks, args.sdk_reps)
    verdict = "ok" if s["ratio"] <= 1.03 else "OVER TARGET"
    print(
        f"[sdk/asyncio] {args.sdk_chunks} chunks x {args.sdk_reps}: raw {s['raw_us']:.1f} µs/chunk, "
        f"guarded {s['guarded_us']:.1f} µs/chunk, ratio {s['ratio']:.3f}x median of pairs "
        f"(of medians {s['ratio_of_medians']:.3f}x, of bests {s['ratio_of_best']:.3f}x; target <= 1.03x) {verdict}"
    )
    st = anyio.run(bench_stall, args.idle_ms, args.stall_runs)
    verdict = "ok" if st["median_ms"] <= 10 else "OVER TARGET"
    print(
        f"[stall/asyncio] idle {args.idle_ms:g} ms x {args.stall_runs}: the endpoint sees the disconnect at "
        f"idle + {st['median_ms']:.1f} ms median (p90 {st['p90_ms']:.1f}, max {st['max_ms']:.1f}; "
        f"target <= 10) {verdict}"
    )


if __name__ == "__main__":
    main()
