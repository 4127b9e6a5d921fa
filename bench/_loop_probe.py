"""``acp-server`` with an opt-in event-loop stall probe, for benchmarks (nothing of it is in the server itself).

``ACP_BENCH_LOOP_PROBE=<file> python bench/_loop_probe.py serve ...`` runs ``acp-server serve ...`` with one extra
task on its asyncio loop: a 1 ms sleep, again and again, whose lateness (how much later than asked it woke) is the
longest stall of the loop meanwhile. Every 100 ms it appends ``<CLOCK_MONOTONIC seconds> <max lateness ms>`` (the
window's worst) to the file, so a bench can take the worst over the instants it measured.
``ACP_BENCH_OBJECTS=<file>`` (opt-in): on each ``SIGUSR1`` the loop appends ``<start> <end> <count>``, the
``CLOCK_MONOTONIC`` instants around one ``len(gc.get_objects())`` (the objects a collection walks; frozen ones are
not counted) and the count: the call itself stops the loop, so a bench leaves that span out of its stall figures.
``ACP_BENCH_PROFILE=<file>`` (also opt-in) profiles the whole run with cProfile and dumps the stats there at exit.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
import time

PERIOD_S = 0.001
WINDOW_S = 0.1


async def probe(path: str) -> None:
    with open(path, "a", buffering=1) as out:  # noqa: ASYNC230 (once, before the loop it measures)
        worst, window_end = 0.0, time.monotonic() + WINDOW_S
        while True:
            asked = time.monotonic()
            await asyncio.sleep(PERIOD_S)
            woke = time.monotonic()
            worst = max(worst, woke - asked - PERIOD_S)
            if woke >= window_end:
                out.write(f"{woke:.6f} {worst * 1000:.3f}\n")
                worst, window_end = 0.0, woke + WINDOW_S


def count_objects(path: str) -> None:
    """One ``<start> <end> <tracked objects>`` line: what a full collection would walk now."""
    start = time.monotonic()
    count = len(gc.get_objects())
    with open(path, "a") as out:
        out.write(f"{start:.6f} {time.monotonic():.6f} {count}\n")


def probed(loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
    """``loop``, which starts the probe as soon as it runs (and counts objects on SIGUSR1 when asked)."""
    path = os.environ["ACP_BENCH_LOOP_PROBE"]
    loop.call_soon(lambda: setattr(loop, "_acp_bench_probe", loop.create_task(probe(path))))
    objects = os.environ.get("ACP_BENCH_OBJECTS")
    if objects and threading.current_thread() is threading.main_thread():  # signals reach the main thread only
        loop.add_signal_handler(signal.SIGUSR1, count_objects, objects)
    return loop


class ProbedPolicy(asyncio.DefaultEventLoopPolicy):
    """Every new asyncio event loop is :func:`probed`."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return probed(super().new_event_loop())


def probe_uvloop() -> None:
    """Every new uvloop loop is :func:`probed` too (the agent runs on uvloop where it is installed: anyio makes its
    loop with ``uvloop.new_event_loop``, past the policy)."""
    try:
        import uvloop
    except ImportError:
        return
    make = uvloop.new_event_loop
    uvloop.new_event_loop = lambda: probed(make())


if __name__ == "__main__":
    if os.environ.get("ACP_BENCH_LOOP_PROBE"):
        asyncio.set_event_loop_policy(ProbedPolicy())
        probe_uvloop()
    from acp_server.cli import main

    profile_to = os.environ.get("ACP_BENCH_PROFILE")  # opt-in too: cProfile of the whole run, dumped at exit
    if not profile_to:
        sys.exit(main(sys.argv[1:]))
    import cProfile

    profiler = cProfile.Profile()
    code = profiler.runcall(main, sys.argv[1:])
    profiler.dump_stats(profile_to)
    sys.exit(code)
