"""Idle sessions' replay rings under a hostile client: the daemon's memory stays flat (issue 13, 5c).

A real ``acp-server serve`` process (its own process, the loopback model in this one) and this process as the
client: ``--sessions`` sessions are created and attached, each gets prompts until it has published ``--events``
events, and is then left idle (no subscriber, never closed). The daemon's RSS is read from ``/proc/<pid>/status``
after every tenth of the sessions.

Before the fix every idle session kept its ring (``--event-ring-size`` 4096 frames) forever: 300 sessions × 5,000
events = +494 MB. Now all rings together hold at most ``--event-ring-total-bytes`` (default 64 MiB), so the RSS
stops growing once the budget is full.

Run: ``python bench/bench_rings.py [--sessions 300] [--events 5000] [--budget-bytes 67108864]``
(``--budget-bytes 0`` = a budget too large to matter: how the daemon behaved before). Exit 1 if a target fails.
Targets (with a budget): RSS growth ≤ budget + 48 MiB; the second half of the sessions adds ≤ 16 MiB (flat).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import anyio
import httpx2

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _proc import rss_kib

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.provider.offline import Answer, LoopbackModel

WORDS_PER_PROMPT = 1000
CONCURRENCY = 8
MIB = 1024 * 1024


def _answer() -> Answer:
    return Answer(text=" ".join(f"w{i}" for i in range(WORDS_PER_PROMPT)), reasoning="")


BODY = {"prompt": [{"type": "text", "text": "fill the ring"}]}


async def post(client: httpx2.AsyncClient, model: LoopbackModel, session_id: str, wait: bool) -> httpx2.Response:
    model.enqueue(_answer())
    response = await client.post(f"/session/{session_id}/prompt", json=BODY, params={"wait": str(wait).lower()})
    if response.status_code not in (200, 202):
        raise SystemExit(f"prompt answered {response.status_code}: {response.text}")
    return response


async def events_per_prompt(client: httpx2.AsyncClient, model: LoopbackModel) -> int:
    """Calibrate on a throwaway session: the ids of two prompt_accepted events one prompt apart."""
    session_id = (await client.post("/session", json={"cwd": "/tmp"})).json()["sessionId"]
    first = (await post(client, model, session_id, wait=False)).json()["lastEventId"]
    await post(client, model, session_id, wait=True)
    second = (await post(client, model, session_id, wait=False)).json()["lastEventId"]
    await post(client, model, session_id, wait=True)
    await client.delete(f"/session/{session_id}")
    return (second - first) // 2


async def fill(client: httpx2.AsyncClient, model: LoopbackModel, session_id: str, prompts: int) -> None:
    """``prompts`` prompts queued at once (FIFO), the last one waited for: then the session is idle."""
    for _ in range(prompts - 1):
        await post(client, model, session_id, wait=False)
    await post(client, model, session_id, wait=True)


async def main(sessions: int, events: int, budget: int) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    async with LoopbackModel() as model:
        command = [
            *(sys.executable, "-m", "acp_server", "serve", "--base-url", model.base_url, "--model", "m"),
            *("--port", "0", "--log-level", "WARNING", "--no-persist", "--max-pending-prompts-per-session", "0"),
            *("--event-ring-total-bytes", str(budget if budget > 0 else 2**50)),
        ]
        print("daemon:", " ".join(command[2:]))
        async with await anyio.open_process(command, env=env) as process:
            assert process.stderr is not None
            stderr = b""
            with anyio.fail_after(30):
                async for chunk in process.stderr:
                    stderr += chunk
                    found = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"(\S+)\n", stderr)
                    if found:
                        url = found.group(1).decode()
                        break
            try:
                async with httpx2.AsyncClient(base_url=url, timeout=120) as client:
                    ids = []
                    for _ in range(sessions):
                        response = await client.post("/session", json={"cwd": "/tmp"})
                        ids.append(response.json()["sessionId"])
                    per_prompt = await events_per_prompt(client, model)
                    prompts = -(-events // per_prompt)
                    base = rss_kib(process.pid)
                    print(f"{sessions} sessions attached, idle: daemon RSS {base / 1024:.1f} MiB")
                    print(f"each session: {prompts} prompts × {per_prompt} events = {prompts * per_prompt} events")
                    samples: list[tuple[int, int]] = []
                    began = time.perf_counter()
                    step = max(1, sessions // 10)
                    for start in range(0, sessions, step):
                        batch = ids[start : start + step]
                        async with anyio.create_task_group() as tg:
                            limiter = anyio.Semaphore(CONCURRENCY)

                            async def one(session_id: str, limiter: anyio.Semaphore = limiter) -> None:
                                async with limiter:
                                    await fill(client, model, session_id, prompts)

                            for session_id in batch:
                                tg.start_soon(one, session_id)
                        done = start + len(batch)
                        rss = rss_kib(process.pid)
                        samples.append((done, rss))
                        print(
                            f"  {done:4d} sessions filled: RSS {rss / 1024:7.1f} MiB "
                            f"(+{(rss - base) / 1024:6.1f})  [{time.perf_counter() - began:5.0f} s]"
                        )
            finally:
                process.terminate()
                with anyio.move_on_after(15):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
    growth_mib = (samples[-1][1] - base) / 1024
    half = next(rss for done, rss in samples if done >= sessions // 2)
    second_half_mib = (samples[-1][1] - half) / 1024
    print(f"RSS growth {growth_mib:.1f} MiB; second half of the sessions: {second_half_mib:+.1f} MiB")
    if budget <= 0:
        print("no budget (the old behaviour): no target")
        return 0
    target = budget / MIB + 48
    ok = growth_mib <= target and second_half_mib <= 16
    print(f"targets: growth ≤ {target:.0f} MiB, second half ≤ 16 MiB: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--budget-bytes", type=int, default=64 * MIB)
    args = parser.parse_args()
    print(
        f"command: python bench/bench_rings.py --sessions {args.sessions} --events {args.events} "
        f"--budget-bytes {args.budget_bytes}"
    )
    sys.exit(anyio.run(main, args.sessions, args.events, args.budget_bytes))
