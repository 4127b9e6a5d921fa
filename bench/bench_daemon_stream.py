"""The daemon streaming many answers at once: ``--sessions`` sessions, each answer ``--rate`` chunks/s for
``--seconds``, all at the same time, through ``acp-server serve`` to one SSE subscriber per session.

Three processes: the endpoint (``bench/_stamp_server.py``: a lean raw-asyncio SSE server whose streams are paced on
an absolute schedule, so it offers the nominal rate, each chunk's text the ``CLOCK_MONOTONIC`` instant it was
written; a real endpoint runs on other hardware, so it is kept cheap), the daemon (``bench/_loop_probe.py serve``:
``acp-server serve`` plus an opt-in probe task that logs the worst lateness of a 1 ms sleep loop, i.e. the event
loop's longest stall), and this script (the subscribers, raw sockets: far cheaper than the daemon they measure).
Figures: chunks delivered per second against the offered rate, the daemon's CPU seconds per 1,000 chunks, the delay
from the endpoint's write to the subscriber's read (p50 / p99 / max), and the loop's longest stall during the run.

The subscribers speak HTTP/1.1, a connection each: the daemon serves nothing else (HTTP/2 is the proxy's in front,
README "HTTP/2"; ``bench_daemon_scale.py`` measures the daemons behind HAProxy).

Targets (2-core box): every offered chunk delivered (10,000 chunks/s at 200 × 50), p99 ≤ 50 ms, stall ≤ 10 ms.

Run: ``python bench/bench_daemon_stream.py [--sessions 200] [--rate 50] [--seconds 10] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time

import anyio
from _endpoint import STAMP_SERVER, model_process
from bench_daemon import cpu_s, percentile, raw_post

from acp_server.daemon import ANNOUNCE_PREFIX

HERE = os.path.dirname(os.path.abspath(__file__))
STAMP = re.compile(rb"(\d+\.\d{6})")
TEXT = [{"type": "text", "text": "stream please"}]


class Subscriber:
    """One session's event stream over a raw socket: the delay of every stamped chunk, and the turn's end."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.delays: list[float] = []
        self.stamps: list[float] = []
        self.last_read = 0.0
        self.ended = anyio.Event()
        self._pending = b""

    async def run(self, host: str, port: int, connected: anyio.Event) -> None:
        async with await anyio.connect_tcp(host, port) as stream:
            request = f"GET /session/{self.session_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
            await stream.send(request.encode())
            connected.set()
            while not self.ended.is_set():
                self.feed(await stream.receive(), time.monotonic())

    def feed(self, data: bytes, now: float) -> None:
        """Bytes of the event stream, read at ``now``."""
        self._pending += data
        cut = self._pending.rfind(b"\n\n")
        if cut < 0:
            return
        frames, self._pending = self._pending[:cut], self._pending[cut + 2 :]
        for frame in frames.split(b"\n\n"):
            if b"event: session_update" in frame:
                for stamp in STAMP.findall(frame):
                    at = float(stamp)
                    self.stamps.append(at)
                    self.delays.append(now - at)
                self.last_read = now
            elif b"event: turn_complete" in frame or b"event: turn_error" in frame:
                self.ended.set()


async def start_daemon(
    base_url: str, probe_file: str, *extra: str, objects_file: str | None = None
) -> tuple[anyio.abc.Process, str]:
    """``acp-server serve`` under the loop probe (``extra``: more serve flags; ``objects_file``: count objects on
    SIGUSR1, see ``_loop_probe.py``); returns the process and the URL it announced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env["ACP_BENCH_LOOP_PROBE"] = probe_file  # ACP_BENCH_PROFILE, when set, passes through: see _loop_probe.py
    if objects_file is not None:
        env["ACP_BENCH_OBJECTS"] = objects_file
    env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="acp-bench-")
    command = [
        *(sys.executable, os.path.join(HERE, "_loop_probe.py"), "serve", "--base-url", base_url, "--model", "m"),
        *("--port", "0", "--log-level", "WARNING", *extra),
    ]
    process = await anyio.open_process(command, env=env, stdin=None, stdout=None)
    assert process.stderr is not None
    stderr = b""
    with anyio.fail_after(20):
        async for chunk in process.stderr:
            stderr += chunk
            match = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"(\S+)\n", stderr)
            if match:
                return process, match.group(1).decode()
    raise RuntimeError(f"the daemon did not announce its address: {stderr!r}")


def worst_stall(
    probe_file: str, start: float, end: float, exclude: list[tuple[float, float]] | None = None
) -> tuple[float, float]:
    """(worst lateness in the window [start, end], the median window's worst) in ms; a probe line from 0.1 s before
    a span of ``exclude`` (the bench's own object counts) to 0.2 s after it is left out: its 100 ms window, made
    longer by the span's own pause, may hold that pause."""
    values = []
    with open(probe_file) as lines:
        for line in lines:
            at, late = (float(field) for field in line.split())
            overlaps = any(a - 0.1 <= at and at - 0.2 <= b for a, b in exclude or [])
            if start <= at <= end + 0.1 and not overlaps:
                values.append(late)
    return (max(values), statistics.median(values)) if values else (float("nan"), float("nan"))


def delivery(subscribers: list[Subscriber]) -> tuple[float, float, float, float]:
    """(chunks/s offered by the endpoint, chunks/s read by the subscribers, the window they are taken over, how far
    apart the streams' first chunks were), all in the window in which every stream ran: from the last stream's
    first chunk to the first stream's last, so a daemon that served the streams one after another could not pass."""
    firsts = [s.stamps[0] for s in subscribers if s.stamps]
    if not firsts:
        return float("nan"), float("nan"), float("nan"), float("nan")
    spread_s = max(firsts) - min(firsts)
    start, end = max(firsts), min(s.stamps[-1] for s in subscribers if s.stamps)
    window_s = end - start
    stamps = [t for s in subscribers for t in s.stamps]
    reads = [t + d for s in subscribers for t, d in zip(s.stamps, s.delays, strict=True)]
    offered = sum(start <= t < end for t in stamps) / window_s if window_s > 0 else float("nan")
    delivered = sum(start <= t < end for t in reads) / window_s if window_s > 0 else float("nan")
    return offered, delivered, window_s, spread_s


async def one_round(sessions: int, rate: float, seconds: float) -> None:
    words = int(rate * seconds)
    probe_file = tempfile.mktemp(prefix="acp-bench-probe-")
    async with model_process("--words", str(words), "--rate", str(rate), server=STAMP_SERVER) as model:
        process, url = await start_daemon(model.base_url, probe_file)
        host, port_text = url.removeprefix("http://").rsplit(":", 1)
        port = int(port_text)
        try:
            # a warm-up turn: imports, the SDK client, the platform probe
            status, _, body = await raw_post(url, "/session", {"cwd": "/tmp"})
            assert status == 201, (status, body)
            warm = Subscriber(body["sessionId"])
            async with anyio.create_task_group() as tg:
                connected = anyio.Event()
                tg.start_soon(warm.run, host, port, connected)
                await connected.wait()
                await raw_post(url, f"/session/{warm.session_id}/prompt", {"prompt": TEXT})
                with anyio.fail_after(seconds * 3 + 30):
                    await warm.ended.wait()
            ids = []
            for _ in range(sessions):
                status, _, body = await raw_post(url, "/session", {"cwd": "/tmp"})
                assert status == 201, (status, body)
                ids.append(body["sessionId"])
            subscribers = [Subscriber(sid) for sid in ids]
            async with anyio.create_task_group() as tg:
                for subscriber in subscribers:
                    connected = anyio.Event()
                    tg.start_soon(subscriber.run, host, port, connected)
                    await connected.wait()
                await anyio.sleep(0.5)
                cpu_before, model_before, own_before = cpu_s(process.pid), cpu_s(model.pid), time.process_time()
                started = time.monotonic()
                async with anyio.create_task_group() as posts:
                    for sid in ids:
                        posts.start_soon(raw_post, url, f"/session/{sid}/prompt", {"prompt": TEXT})
                with anyio.fail_after(seconds * 5 + 60):
                    for subscriber in subscribers:
                        await subscriber.ended.wait()
                ended = time.monotonic()
                cpu = cpu_s(process.pid) - cpu_before
                model_cpu, own_cpu = cpu_s(model.pid) - model_before, time.process_time() - own_before
                tg.cancel_scope.cancel()
        finally:
            process.terminate()
            with anyio.move_on_after(15):
                await process.wait()
            if process.returncode is None:
                process.kill()
            await process.aclose()
    delays = [d * 1000 for s in subscribers for d in s.delays]
    received = len(delays)
    expected = sessions * words
    # The streams start one after another (each prompt is admitted in turn): see delivery().
    offered, delivered, window_s, spread_s = delivery(subscribers)
    stall, typical = worst_stall(probe_file, started, ended)
    os.unlink(probe_file)
    print(f"  chunks: {received:,} of {expected:,} received ({sessions} sessions × {words}), {ended - started:.1f}s")
    verdict = "met" if received == expected and delivered >= 0.98 * sessions * rate else "MISSED"
    print(
        f"  offered by the endpoint {offered:,.0f} chunks/s; delivered {delivered:,.0f} chunks/s "
        f"(target: all, {sessions * rate:,.0f}/s): {verdict}; over the {window_s:.1f}s all streams ran (their first "
        f"chunks spread over {spread_s:.2f}s)"
    )
    print(
        f"  daemon CPU {cpu:.2f}s: {cpu / (received / 1000):.3f} CPU-s per 1,000 chunks; over the "
        f"{ended - started:.1f}s the endpoint used {model_cpu:.2f} CPU-s, the subscribers (this script) {own_cpu:.2f}"
    )
    p99 = percentile(delays, 0.99)
    print(
        f"  endpoint write → subscriber read: p50 {statistics.median(delays):.1f} ms, p99 {p99:.1f} ms, "
        f"max {max(delays):.1f} ms (target p99 <= 50 ms): {'met' if p99 <= 50 else 'MISSED'}"
    )
    print(
        f"  event loop's longest stall (1 ms sleep probe): {stall:.1f} ms, typical 100 ms window's worst "
        f"{typical:.1f} ms (target <= 10 ms): {'met' if stall <= 10 else 'MISSED'}"
    )


async def main(sessions: int, rate: float, seconds: float, repeat: int) -> None:
    print(
        f"command: python bench/bench_daemon_stream.py --sessions {sessions} --rate {rate:g} "
        f"--seconds {seconds:g} --repeat {repeat}"
    )
    print("subscribers: HTTP/1.1, a connection each")
    print("targets: all chunks delivered, p99 write → read <= 50 ms, event loop stall <= 10 ms")
    print(f"machine: {os.cpu_count()} CPUs (shared), Python {sys.version.split()[0]}")
    for round_ in range(1, repeat + 1):
        print(f"round {round_}:")
        await one_round(sessions, rate, seconds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    anyio.run(main, args.sessions, args.rate, args.seconds, args.repeat)
