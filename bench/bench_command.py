"""Cost of the hardening of a local ``run_command``: its watchdog (what keeps a command from outliving the agent)
and, as root, the wrapper that drops ``CAP_SYS_PTRACE`` before it execs the shell.

In process: ``run_command`` of ``true`` prepared and run through the tools exactly as the turn does (a real
``/bin/sh`` in its own process group, its output pipe, the reap), hardened (the default) and not (neither watchdog
nor wrapper), interleaved, ``--runs`` of each. The watchdog is a second process (``python -I -S``, standard library
only) started next to the shell and stopped once the shell's group is gone; the wrapper is util-linux's
``setpriv`` (without it, a ``python -I -S``) that execs the shell in its place. Target on a 2-core machine: the
hardening adds at most 30 ms per command (median), and the whole call stays under 60 ms (median).

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

from acp_server.tools import TOOL_NAMES, _command, prepare_call

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


def _none() -> tuple[str, ...]:
    return ()


async def main(runs: int) -> None:
    print(f"command: python bench/bench_command.py --runs {runs}")
    print(f"targets: the hardening adds <= {TARGET_EXTRA_MS:g} ms per command; a call <= {TARGET_TOTAL_MS:g} ms")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores shared with other work (load average {load})")
    python, prefix = sys.executable, _command._drop_ptrace_prefix
    guarded: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory(prefix="acp-bench-command-") as cwd:
        await _one(cwd)  # warm-up
        for _ in range(runs):
            sys.executable, _command._drop_ptrace_prefix = python, prefix
            guarded.append(await _one(cwd))
            sys.executable = ""  # no Python: no watchdog
            _command._drop_ptrace_prefix = _none  # type: ignore[assignment]  # and no wrapper
            bare.append(await _one(cwd))
        sys.executable, _command._drop_ptrace_prefix = python, prefix
    with_ms, without_ms = statistics.median(guarded), statistics.median(bare)
    print(f"run_command 'true' hardened:     median {with_ms:.1f} ms (min {min(guarded):.1f})")
    print(f"run_command 'true' not hardened: median {without_ms:.1f} ms (min {min(bare):.1f})")
    extra = with_ms - without_ms
    verdict = "OK" if extra <= TARGET_EXTRA_MS and with_ms <= TARGET_TOTAL_MS else "MISSED"
    print(f"the hardening adds {extra:.1f} ms per command (running as uid {os.geteuid()}): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    anyio.run(main, parser.parse_args().runs)
