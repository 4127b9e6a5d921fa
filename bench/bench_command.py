"""Cost of the watchdog of a local ``run_command`` (what keeps a command from outliving the agent).

In process: ``run_command`` of ``true`` prepared and run through the tools exactly as the turn does (a real
``/bin/sh`` in its own process group, its output pipe, the reap), with the watchdog (the default) and without it
(no Python to run it), interleaved, ``--runs`` of each. The watchdog is a second process (``python -I -S``, standard
library only) started next to the shell and stopped once the shell's group is gone. Target on a 2-core machine:
the watchdog adds at most 30 ms per command (median), and the whole call stays under 60 ms (median).

Run: ``python bench/bench_command.py [--runs 30]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import anyio

from acp_server.tools import TOOL_NAMES, prepare_call

TARGET_EXTRA_MS = 30.0
TARGET_TOTAL_MS = 60.0


async def _one(cwd: str) -> float:
    start = time.perf_counter()
    prepared = await prepare_call("run_command", '{"command": "true"}', cwd=cwd, client=None, offered=TOOL_NAMES)

    async def sink(content: object) -> None:
        pass

    result = await prepared.run(sink)
    elapsed = (time.perf_counter() - start) * 1000
    assert result.output.startswith("Exit code: 0"), result.output
    return elapsed


async def main(runs: int) -> None:
    print(f"command: python bench/bench_command.py --runs {runs}")
    print(f"targets: the watchdog adds <= {TARGET_EXTRA_MS:g} ms per command; a call <= {TARGET_TOTAL_MS:g} ms")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores shared with other work (load average {load})")
    python = sys.executable
    guarded: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acp-bench-command-") as cwd:
        await _one(cwd)  # warm-up
        for _ in range(runs):
            sys.executable = python
            guarded.append(await _one(cwd))
            sys.executable = ""  # no Python to run the watchdog: the command runs without it
            bare.append(await _one(cwd))
        sys.executable = python
    with_ms, without_ms = statistics.median(guarded), statistics.median(bare)
    print(f"run_command 'true' with the watchdog:    median {with_ms:.1f} ms (min {min(guarded):.1f})")
    print(f"run_command 'true' without the watchdog: median {without_ms:.1f} ms (min {min(bare):.1f})")
    extra = with_ms - without_ms
    verdict = "OK" if extra <= TARGET_EXTRA_MS and with_ms <= TARGET_TOTAL_MS else "MISSED"
    print(f"the watchdog adds {extra:.1f} ms per command: {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    anyio.run(main, parser.parse_args().runs)
