"""Start-up cost of a sandboxed command: ``run_command`` of ``true`` run through the tools exactly as the turn
does, unsandboxed and in the sandbox (bubblewrap, and Landlock where it works), interleaved, ``--runs`` of each;
the median of each and what the sandbox adds. Target: the sandbox adds at most 30 ms per command (median).

Run: ``python bench/bench_sandbox.py [--runs 30]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import anyio

from acp_server.tools import TOOL_NAMES, SandboxPolicy, configure_sandbox, prepare_call, sandbox_support

TARGET_EXTRA_MS = 30.0


async def _one(cwd: str, sandboxed: bool) -> float:
    start = time.perf_counter()
    prepared = await prepare_call(
        "run_command", '{"command": "true"}', cwd=cwd, client=None, offered=TOOL_NAMES, sandboxed=sandboxed
    )

    async def sink(content: object) -> None:
        pass

    result = await prepared.run(sink)
    elapsed = (time.perf_counter() - start) * 1000
    assert result.output.startswith("Exit code: 0"), result.output
    return elapsed


async def _main(runs: int) -> int:
    print(f"command: python bench/bench_sandbox.py --runs {runs}; target: the sandbox adds <= {TARGET_EXTRA_MS:g} ms")
    failed = False
    with tempfile.TemporaryDirectory() as cwd:
        for mechanism in ("bubblewrap", "landlock"):
            configure_sandbox(SandboxPolicy(mechanism=mechanism))  # type: ignore[arg-type]
            support = sandbox_support()
            if support.mechanism is None:
                print(f"{mechanism}: skipped ({support.detail})")
                continue
            plain: list[float] = []
            boxed: list[float] = []
            await _one(cwd, False)
            await _one(cwd, True)  # warm both paths
            for _ in range(runs):
                plain.append(await _one(cwd, False))
                boxed.append(await _one(cwd, True))
            base, inside = statistics.median(plain), statistics.median(boxed)
            extra = inside - base
            verdict = "met" if extra <= TARGET_EXTRA_MS else "MISSED"
            failed |= extra > TARGET_EXTRA_MS
            print(f"{mechanism}: `true` {inside:.1f} ms sandboxed, {base:.1f} ms not; +{extra:.1f} ms ({verdict})")
    configure_sandbox(SandboxPolicy())
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    return anyio.run(_main, parser.parse_args().runs)


if __name__ == "__main__":
    sys.exit(main())
