"""What building a turn's system prompt costs a prompt: the environment block (one bounded ``git status``) and the
project instructions (read afresh in a worker thread), in three directories:

1. **no repository** (a temporary directory with a 4 KiB AGENTS.md): no ``git`` is run. Target: median ≤ 2 ms.
2. **this repository** (the checkout the script runs from, AGENTS.md-free or not): one ``git status``. Target:
   median ≤ 50 ms.
3. **a hung git** (a fake ``git`` first on PATH that never answers): the bound. Target: every build ≤ 300 ms (the
   200 ms bound plus killing and reaping the process group).

Run: ``python bench/bench_system_prompt.py [--rounds 30]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from acp_server.turn import DEFAULT_SYSTEM_PROMPT, build_system_prompt

REPO = Path(__file__).resolve().parent.parent


async def _timings(cwd: str, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await build_system_prompt(DEFAULT_SYSTEM_PROMPT, cwd)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _report(name: str, times: list[float], target: str, ok: bool) -> None:
    print(
        f"{name:<16} median {statistics.median(times):7.2f} ms   max {max(times):7.2f} ms   "
        f"target {target}: {'OK' if ok else 'MISSED'}"
    )


async def main(rounds: int) -> None:
    print(f"command: python bench/bench_system_prompt.py --rounds {rounds}")
    with tempfile.TemporaryDirectory() as plain:
        (Path(plain) / "AGENTS.md").write_text("x" * 4096)
        times = await _timings(plain, rounds)
        _report("no repository", times, "median <= 2 ms", statistics.median(times) <= 2)
    times = await _timings(str(REPO), rounds)
    _report("this repository", times, "median <= 50 ms", statistics.median(times) <= 50)
    with tempfile.TemporaryDirectory() as hung:
        (Path(hung) / ".git").mkdir()
        fake = Path(hung) / "bin" / "git"
        fake.parent.mkdir()
        fake.write_text("#!/bin/sh\nexec sleep 600\n")
        fake.chmod(0o755)
        path = os.environ["PATH"]
        os.environ["PATH"] = f"{fake.parent}{os.pathsep}{path}"
        try:
            times = await _timings(hung, max(3, rounds // 5))
        finally:
            os.environ["PATH"] = path
        _report("a hung git", times, "every build <= 300 ms", max(times) <= 300)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    anyio.run(main, parser.parse_args().rounds)
