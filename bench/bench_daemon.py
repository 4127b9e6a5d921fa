"""The HTTP daemon under load, over real sockets: a real ``acp-server serve`` process, the loopback model.

1. idle memory per SSE subscriber: RSS of the daemon before / after opening ``--subscribers`` idle event streams;
2. admission: latency of single POSTs (keep-alive); then ``--sessions`` sessions × 7 prompts posted all at once
   (one connection each) while each session's first turn is slow → exactly 5 accepted and 2 refused (503,
   Retry-After: 5, exact body) per session; every accepted prompt ends once on its session's event stream (ids
   contiguous: nothing lost); burst latency p50/p99 and requests/s;
3. throughput: ``--sessions`` new sessions × 5 prompts at once, fast model → every prompt accepted and completed;
   end-to-end prompts/s.

Run: ``python bench/bench_daemon.py [--sessions 100] [--subscribers 1000]``. Exit 1 if an invariant fails.
Targets: zero lost, refusals exactly 2 per session, single admission p99 ≤ 10 ms, idle subscriber ≤ 64 KiB.
The burst latency is queueing (700 connections arrive at once on one event loop): ≈ the burst's duration.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

import anyio
import httpx2

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _proc import rss_kib

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.provider.offline import Answer, HangAfterHeaders, LoopbackModel

LIMIT = 5
PROMPTS_PER_SESSION = 7
TEXT = [{"type": "text", "text": "benchmark prompt"}]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Failure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


class Follower:
    """Reads one session's event stream; records every event and wakes the bench when prompts end."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.ended: dict[str, dict[str, Any]] = {}
        self.changed = anyio.Event()

    async def run(self, client: httpx2.AsyncClient, connected: anyio.Event) -> None:
        async with client.stream("GET", f"/session/{self.session_id}/events") as response:
            connected.set()
            async for sse in httpx2.EventSource(response):
                data = json.loads(sse.data)
                self.events.append((int(sse.id), sse.event, data))
                if sse.event in ("turn_complete", "turn_error"):
                    self.ended[data["promptId"]] = data
                    self.changed.set()
                    self.changed = anyio.Event()

    async def wait_ended(self, count: int) -> None:
        while len(self.ended) < count:
            await self.changed.wait()


async def follow(tg: Any, client: httpx2.AsyncClient, session_ids: list[str]) -> dict[str, Follower]:
    followers = {sid: Follower(sid) for sid in session_ids}
    for follower in followers.values():
        connected = anyio.Event()
        tg.start_soon(follower.run, client, connected)
        await connected.wait()
    return followers


def check_streams(followers: dict[str, Follower], accepted: dict[str, list[str]]) -> None:
    """Nothing lost: ids contiguous (from the session's first); each accepted prompt: accepted once, ended once,
    end_turn, in order."""
    for sid, follower in followers.items():
        ids = [event_id for event_id, _, _ in follower.events]
        check(ids == list(range(ids[0], ids[0] + len(ids))), f"session {sid}: event ids not contiguous")
        announced = [d["promptId"] for _, e, d in follower.events if e == "prompt_accepted"]
        check(sorted(announced) == sorted(accepted[sid]), f"session {sid}: prompt_accepted events do not match")
        ended = [d for _, e, d in follower.events if e in ("turn_complete", "turn_error")]
        check([d["promptId"] for d in ended] == announced, f"session {sid}: prompts did not end once each, in order")
        check(all(d.get("stopReason") == "end_turn" for d in ended), f"session {sid}: a prompt did not end_turn")


async def create_sessions(client: httpx2.AsyncClient, n: int) -> list[str]:
    ids: list[str] = []
    for _ in range(n):
        response = await client.post("/session", json={"cwd": "/tmp"})
        check(response.status_code == 201, f"POST /session answered {response.status_code}")
        ids.append(response.json()["sessionId"])
    return ids


async def raw_post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """One ``POST`` on its own connection, HTTP/1.1 by hand: a client far cheaper than the daemon it measures
    (an ``httpx2`` pool of 700 connections costs the bench process ~8 ms of CPU per request)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    async with await anyio.connect_tcp(host, int(port)) as stream:
        await stream.send(head + payload)
        raw = b""
        try:
            while True:
                raw += await stream.receive()
        except anyio.EndOfStream:
            pass
    header_block, _, content = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = header_block.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, json.loads(content)


async def post_all(url: str, session_ids: list[str], per_session: int) -> tuple[list[Any], float]:
    """Every prompt at once; returns (session, status, body, headers, latency_s) per request, and the wall time."""
    results: list[Any] = []
    start = anyio.Event()
    began = 0.0

    async def post(sid: str) -> None:
        await start.wait()
        began = time.perf_counter()
        status, headers, body = await raw_post(url, f"/session/{sid}/prompt", {"prompt": TEXT})
        results.append((sid, status, body, headers, time.perf_counter() - began))

    async with anyio.create_task_group() as tg:
        for sid in session_ids:
            for _ in range(per_session):
                tg.start_soon(post, sid)
        await anyio.sleep(0.1)  # let every task reach the start line
        began = time.perf_counter()
        start.set()
    return results, time.perf_counter() - began


async def main(sessions: int, subscribers: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    limits = httpx2.Limits(max_connections=subscribers + 2 * sessions * PROMPTS_PER_SESSION + 100)
    async with LoopbackModel() as model:
        command = [
            *(sys.executable, "-m", "acp_server", "serve", "--base-url", model.base_url, "--model", "m"),
            *("--port", "0", "--log-level", "WARNING"),
        ]
        async with await anyio.open_process(command, env=env, stdin=None) as process:
            assert process.stderr is not None
            stderr = b""
            with anyio.fail_after(20):
                async for chunk in process.stderr:
                    stderr += chunk
                    match = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"(\S+)\n", stderr)
                    if match:
                        url = match.group(1).decode()
                        break
            try:
                async with httpx2.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
                    await run_phases(client, model, process.pid, sessions, subscribers)
            finally:
                process.terminate()
                with anyio.move_on_after(15):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
            code = await process.wait()
            print(f"daemon exit code after SIGTERM: {code}")
            check(code == 0, "the daemon did not exit 0 on SIGTERM")


async def run_phases(
    client: httpx2.AsyncClient, model: LoopbackModel, pid: int, sessions: int, subscribers: int
) -> None:
    warm = await create_sessions(client, 1)
    await client.post(f"/session/{warm[0]}/prompt", json={"prompt": TEXT}, params={"wait": "true"})  # imports done

    # 1. idle memory per SSE subscriber
    idle_sessions = await create_sessions(client, 10)
    await anyio.sleep(0.5)
    before = rss_kib(pid)
    async with anyio.create_task_group() as idle:
        for i in range(subscribers):
            connected = anyio.Event()
            idle.start_soon(Follower(idle_sessions[i % 10]).run, client, connected)
            await connected.wait()
        await anyio.sleep(0.5)
        after = rss_kib(pid)
        idle.cancel_scope.cancel()
    per_subscriber = (after - before) / subscribers
    print(f"idle SSE subscribers: {subscribers}; daemon RSS {before} → {after} KiB: {per_subscriber:.1f} KiB each")

    # 2a. admission latency, one request at a time (keep-alive connection); each session's first turn hangs, so the
    #     measured POSTs are admitted into the FIFO (4 per session) or refused (the 6th) with no turn competing
    quiet: list[float] = []
    quiet_refused: list[float] = []
    quiet_sessions = await create_sessions(client, 50)
    model.enqueue(*(HangAfterHeaders() for _ in quiet_sessions))
    for sid in quiet_sessions:
        check((await client.post(f"/session/{sid}/prompt", json={"prompt": TEXT})).status_code == 202, "first")
        for expected, into in ((202, quiet), (202, quiet), (202, quiet), (202, quiet), (503, quiet_refused)):
            began = time.perf_counter()
            response = await client.post(f"/session/{sid}/prompt", json={"prompt": TEXT})
            into.append((time.perf_counter() - began) * 1000)
            check(response.status_code == expected, f"quiet admission: {response.status_code}")
    for sid in quiet_sessions:
        check((await client.delete(f"/session/{sid}")).status_code == 204, "delete")
    print(
        f"admission one at a time (keep-alive): 202 p50 {statistics.median(quiet):.2f} ms, "
        f"p99 {percentile(quiet, 0.99):.2f} ms ({len(quiet)}); 503 p50 {statistics.median(quiet_refused):.2f} ms, "
        f"p99 {percentile(quiet_refused, 0.99):.2f} ms ({len(quiet_refused)})"
    )

    # 2b. admission under a burst: 7 prompts per session at once, the first turn of each session slow (the model
    #     plays the scripted behaviours FIFO, and only first turns reach it before the burst is over)
    session_ids = await create_sessions(client, sessions)
    model.enqueue(*(Answer(text="slow " * 10, reasoning="", chunk_delay_s=0.25) for _ in range(sessions)))
    async with anyio.create_task_group() as tg:
        followers = await follow(tg, client, session_ids)
        began = time.perf_counter()
        cpu_before, own_before = cpu_s(pid), time.process_time()
        results, burst_s = await post_all(str(client.base_url).rstrip("/"), session_ids, PROMPTS_PER_SESSION)
        cpu_burst, own_burst = cpu_s(pid) - cpu_before, time.process_time() - own_before
        accepted: dict[str, list[str]] = defaultdict(list)
        refused: dict[str, int] = defaultdict(int)
        for sid, status, body, headers, _ in results:
            if status == 202:
                accepted[sid].append(body["promptId"])
            else:
                check(status == 503, f"unexpected status {status}: {body}")
                check(headers.get("retry-after") == "5", "a refusal lacks Retry-After: 5")
                check(
                    body == {
                        "code": "prompt_queue_full",
                        "error": f'Prompt queue full for session "{sid}" ({LIMIT}/{LIMIT} pending)',
                        "sessionId": sid,
                        "limit": LIMIT,
                        "pendingCount": LIMIT,
                    },
                    f"refusal body differs: {body}",
                )
                refused[sid] += 1
        with anyio.fail_after(60):
            for sid, follower in followers.items():
                await follower.wait_ended(len(accepted[sid]))
        done_s = time.perf_counter() - began
        tg.cancel_scope.cancel()
    latencies = [r[4] * 1000 for r in results]
    total_accepted = sum(len(v) for v in accepted.values())
    total_refused = sum(refused.values())
    print(
        f"admission: {len(results)} POSTs at once in {burst_s:.2f}s ({len(results) / burst_s:.0f} req/s); "
        f"accepted {total_accepted}, refused {total_refused}; "
        f"latency p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms, "
        f"max {max(latencies):.1f} ms; all accepted ended after {done_s:.2f}s; "
        f"CPU during the burst: daemon {cpu_burst:.2f}s, bench client {own_burst:.2f}s"
    )
    check(all(len(accepted[sid]) == LIMIT for sid in session_ids), "a session did not accept exactly 5")
    check(all(refused[sid] == PROMPTS_PER_SESSION - LIMIT for sid in session_ids), "a session did not refuse 2")
    check_streams(followers, accepted)

    # 3. throughput: 5 prompts per new session at once, fast model
    session_ids = await create_sessions(client, sessions)
    async with anyio.create_task_group() as tg:
        followers = await follow(tg, client, session_ids)
        began = time.perf_counter()
        cpu_before, own_before = cpu_s(pid), time.process_time()
        results, _ = await post_all(str(client.base_url).rstrip("/"), session_ids, LIMIT)
        accepted = defaultdict(list)
        for sid, status, body, _, _ in results:
            check(status == 202, f"throughput phase: {status} {body}")
            accepted[sid].append(body["promptId"])
        with anyio.fail_after(120):
            for follower in followers.values():
                await follower.wait_ended(LIMIT)
        elapsed = time.perf_counter() - began
        cpu_run, own_run = cpu_s(pid) - cpu_before, time.process_time() - own_before
        tg.cancel_scope.cancel()
    check_streams(followers, accepted)
    events = sum(len(f.events) for f in followers.values())
    print(
        f"throughput: {len(results)} prompts on {sessions} sessions completed in {elapsed:.2f}s: "
        f"{len(results) / elapsed:.0f} prompts/s, {events / elapsed:.0f} SSE events/s; zero lost; "
        f"CPU: daemon {cpu_run:.2f}s ({cpu_run / len(results) * 1000:.1f} ms/prompt), "
        f"bench client + model {own_run:.2f}s"
    )
    print(f"daemon RSS at the end: {rss_kib(pid)} KiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--subscribers", type=int, default=1000)
    arguments = parser.parse_args()
    try:
        anyio.run(main, arguments.sessions, arguments.subscribers)
    except Failure as failure:
        print(f"FAILED: {failure}")
        sys.exit(1)
