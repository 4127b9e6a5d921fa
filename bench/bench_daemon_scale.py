"""Several ``acp-server serve`` processes behind HAProxy (``deploy/haproxy.cfg``) on this machine, under streaming.

For each configuration — 1 process without HAProxy, then 1, 2 and 4 processes behind it (``--processes``) —
``--sessions`` sessions are created through the front (HAProxy spreads new sessions, then routes each session's
requests to its process), one SSE subscriber per session reads ``/session/{id}/events`` through the front, and every
session gets one prompt at once: the endpoint (``bench/_stamp_server.py``, its own process, one for all daemons)
streams ``--rate`` chunks/s per stream for ``--seconds``, each chunk's text the instant it was written.

Printed per configuration: delivered chunks/s (over the window in which every stream ran), CPU seconds per 1,000
chunks summed over the serve processes (``/proc/PID/stat``; HAProxy's, the endpoint's and this client's own CPU
beside it, so a saturated client is seen), p99 endpoint-write → subscriber-read, each process's longest event-loop
stall (``bench/_loop_probe.py``), and objects per streaming session in each process: the ``gc.get_objects()``
count mid-stream minus the count before the sessions were made, divided by the sessions that process holds (counted
on ``SIGUSR1`` by ``_loop_probe.py``; the count's own pause is left out of the stall).

Every serve process shares one ``--state-dir`` (SQLite; each session's owner is the process that made it), or runs
with ``--no-persist`` when asked. HAProxy configurations are skipped when ``haproxy`` is not installed.

Targets at 2 processes (2-core box): every chunk delivered (10,000 chunks/s at 200 × 50), p99 ≤ 50 ms, longest stall
per process ≤ 25 ms.

Run: ``python bench/bench_daemon_scale.py [--sessions 200] [--rate 50] [--seconds 10] [--processes 1,2,4]
[--no-persist]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from _endpoint import STAMP_SERVER, model_process
from bench_daemon import cpu_s, percentile, raw_post
from bench_daemon_stream import TEXT, Subscriber, delivery, start_daemon, worst_stall

HAPROXY = shutil.which("haproxy")
CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "haproxy.cfg"
SERVER_LINE = re.compile(r'^(\s*)server daemon\d+ "\$\{ACP_DAEMON_\d+\}"\s*$')
TARGET_P99_MS = 50.0
TARGET_STALL_MS = 25.0


def haproxy_config(text: str, servers: int) -> str:
    """``deploy/haproxy.cfg``'s text with its ``server daemonK "${ACP_DAEMON_K}"`` lines replaced by ``servers``
    such lines (daemon1..N reading ACP_DAEMON_1..N) where the first stood; every other line (the routing) is kept."""
    if servers < 1:
        raise ValueError(f"at least one server; got {servers}")
    lines = text.splitlines(keepends=True)
    found = [(i, m) for i, line in enumerate(lines) if (m := SERVER_LINE.match(line))]
    if not found:
        raise ValueError('no `server daemonK "${ACP_DAEMON_K}"` line in the configuration')
    first, match = found[0]
    indent = match.group(1)
    generated = [f'{indent}server daemon{k} "${{ACP_DAEMON_{k}}}"\n' for k in range(1, servers + 1)]
    dropped = {i for i, _ in found}
    rest = (line for i, line in enumerate(lines) if i > first and i not in dropped)
    return "".join([*lines[:first], *generated, *rest])


def holders(table: str) -> dict[str, int]:
    """Session id → server number (1-based) from HAProxy's ``show table daemons``."""
    return {key: int(server) for key, server in re.findall(r"key=(\S+) .*?server_id=(\d+)", table)}


def parse_processes(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError(f"a comma-separated list of process counts >= 1; got {text!r}")
    return counts


def waited_s(pid: int) -> float:
    """Seconds the process's main thread (the event loop's) was runnable but waiting for a CPU
    (``/proc/PID/schedstat``'s second field): on a loaded machine a loop stall is partly this, not the daemon's work."""
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[1]) / 1e9


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rows(path: str) -> list[list[str]]:
    """The complete lines of a file, split (a line still being written is left for the next look)."""
    with open(path) as lines:
        return [line.split() for line in lines if line.endswith("\n")]


def _write_configs(tmp: str, servers: int) -> tuple[str, str, str]:
    """The derived HAProxy configuration and one adding an admin socket; returns both paths and the socket's."""
    config, admin_config, admin = (os.path.join(tmp, name) for name in ("haproxy.cfg", "admin.cfg", "admin.sock"))
    with open(config, "w") as out:
        out.write(haproxy_config(CONFIG.read_text(), servers))
    with open(admin_config, "w") as out:
        out.write(f"global\n    stats socket {admin} level admin\n")
    return config, admin_config, admin


@dataclass
class Daemon:
    """One serve process under the loop probe: its URL, its probe file and the object counts it answered."""

    process: anyio.abc.Process
    url: str
    probe_file: str
    objects_file: str
    counted: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, objects)

    async def count_objects(self) -> int:
        """Ask the process for its tracked-object count (SIGUSR1) and wait for its line."""
        before = len(self.counted)
        self.process.send_signal(signal.SIGUSR1)
        with anyio.fail_after(20):
            while True:
                rows = _rows(self.objects_file)
                if len(rows) > before:
                    start, end, count = rows[before]
                    self.counted.append((float(start), float(end), int(count)))
                    return int(count)
                await anyio.sleep(0.02)


@dataclass
class Result:
    """One configuration's figures; per-process lists are in the order of the processes (HAProxy's daemon1..N)."""

    name: str
    processes: int
    received: int
    expected: int
    delivered: float
    offered: float
    window_s: float
    cpu_per_1000: float
    p50_ms: float
    p99_ms: float
    stalls_ms: list[float]
    objects: list[float]  # per streaming session, per process
    idle_objects: list[float]  # per session before its prompt (subscriber attached), per process
    held: list[int]
    notes: str
    failures: list[str]


async def _admin(path: str, command: str) -> str:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(command.encode() + b"\n")
        answer = bytearray()
        try:
            while True:
                answer += await stream.receive()
        except anyio.EndOfStream:
            return answer.decode()


async def _start_haproxy(tmp: str, daemons: list[Daemon]) -> tuple[anyio.abc.Process, str, str]:
    """HAProxy on the derived configuration; returns it, its URL and its admin socket once every server is UP."""
    assert HAPROXY is not None
    config, admin_config, admin = _write_configs(tmp, len(daemons))
    listen = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "ACP_LISTEN": listen}
    env |= {f"ACP_DAEMON_{i}": d.url.removeprefix("http://") for i, d in enumerate(daemons, 1)}
    command = [HAPROXY, "-db", "-f", config, "-f", admin_config]
    process = await anyio.open_process(command, env=env, stdin=None, stdout=None, stderr=None)
    with anyio.fail_after(30):
        while True:
            if await anyio.Path(admin).exists():
                rows = (await _admin(admin, "show stat")).splitlines()
                header = rows[0].lstrip("# ").split(",") if rows else []
                if "status" in header:
                    status, name = header.index("status"), header.index("svname")
                    cells = [r.split(",") for r in rows[1:] if r.count(",") > status]
                    states = [c[status] for c in cells if c[name].startswith("daemon")]
                    if len(states) == len(daemons) and all(s == "UP" for s in states):
                        return process, f"http://{listen}", admin
            await anyio.sleep(0.1)


async def _read(subscriber: Subscriber, host: str, port: int, connected: anyio.Event, cut: list[str]) -> None:
    """``subscriber.run``, noting (in ``cut``) a stream that closes or fails before its turn ended, e.g. when
    HAProxy marks its process down and shuts its sessions."""
    try:
        await subscriber.run(host, port, connected)
    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
        cut.append(subscriber.session_id)
        connected.set()
        subscriber.ended.set()


async def _prompt(front: str, subscriber: Subscriber, refused: list[int]) -> None:
    """Post the session's prompt; a refusal (any status but 202) is noted and its stream no longer awaited."""
    try:
        status, _, _ = await raw_post(front, f"/session/{subscriber.session_id}/prompt", {"prompt": TEXT})
    except (OSError, ValueError, anyio.EndOfStream, anyio.BrokenResourceError):
        status = 0  # no answer, or not the daemon's JSON (HAProxy's own 503 page)
    if status != 202:
        refused.append(status)
        subscriber.ended.set()


async def _turn(url: str, host: str, port: int, seconds: float) -> None:
    """One session and one streamed turn on a daemon, read to its end (warms imports, the SDK client, the probe)."""
    status, _, body = await raw_post(url, "/session", {"cwd": "/tmp"})
    assert status == 201, (status, body)
    subscriber = Subscriber(body["sessionId"])
    async with anyio.create_task_group() as tg:
        connected = anyio.Event()
        tg.start_soon(subscriber.run, host, port, connected)
        await connected.wait()
        await raw_post(url, f"/session/{subscriber.session_id}/prompt", {"prompt": TEXT})
        with anyio.fail_after(seconds * 3 + 60):
            await subscriber.ended.wait()
        tg.cancel_scope.cancel()


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


async def run_configuration(
    processes: int, haproxy: bool, sessions: int, rate: float, seconds: float, no_persist: bool
) -> Result:
    name = f"{processes} process{'es' if processes > 1 else ''}, {'HAProxy' if haproxy else 'direct'}"
    print(f"{name}:", flush=True)
    words = int(rate * seconds)
    tmp = tempfile.mkdtemp(prefix="acp-bench-scale-")
    store = ["--no-persist"] if no_persist else ["--state-dir", os.path.join(tmp, "state")]
    daemons: list[Daemon] = []
    proxy: anyio.abc.Process | None = None
    async with model_process("--words", str(words), "--rate", str(rate), server=STAMP_SERVER) as model:
        try:
            for k in range(processes):
                probe, objects = os.path.join(tmp, f"probe-{k}"), os.path.join(tmp, f"objects-{k}")
                open(objects, "w").close()  # noqa: ASYNC230 (before the run it measures)
                process, url = await start_daemon(model.base_url, probe, *store, objects_file=objects)
                daemons.append(Daemon(process, url, probe, objects))
            admin = ""
            if haproxy:
                proxy, front, admin = await _start_haproxy(tmp, daemons)
            else:
                front = daemons[0].url
            host, port = _host_port(front)
            async with anyio.create_task_group() as warm:  # each process directly, all at once
                for daemon in daemons:
                    warm.start_soon(_turn, daemon.url, *_host_port(daemon.url), seconds)
            await anyio.sleep(0.5)
            base = [await d.count_objects() for d in daemons]
            ids = []
            for _ in range(sessions):
                status, _, body = await raw_post(front, "/session", {"cwd": "/tmp"})
                assert status == 201, (status, body)
                ids.append(body["sessionId"])
            owner = holders(await _admin(admin, "show table daemons")) if haproxy else dict.fromkeys(ids, 1)
            held = [sum(owner.get(sid) == k for sid in ids) for k in range(1, processes + 1)]
            subscribers = [Subscriber(sid) for sid in ids]
            cut: list[str] = []
            refused: list[int] = []
            unfinished = 0
            async with anyio.create_task_group() as tg:
                for subscriber in subscribers:
                    connected = anyio.Event()
                    tg.start_soon(_read, subscriber, host, port, connected, cut)
                    await connected.wait()
                await anyio.sleep(0.5)
                idle = [await d.count_objects() for d in daemons]
                cpu_before = [cpu_s(d.process.pid) for d in daemons]
                wait_before = [waited_s(d.process.pid) for d in daemons]
                model_before, own_before = cpu_s(model.pid), time.process_time()
                proxy_before = cpu_s(proxy.pid) if proxy is not None else 0.0
                started = time.monotonic()
                async with anyio.create_task_group() as posts:
                    for subscriber in subscribers:
                        posts.start_soon(_prompt, front, subscriber, refused)
                await anyio.sleep(seconds / 2)
                streaming = [await d.count_objects() for d in daemons]
                with anyio.move_on_after(seconds * 5 + 60):
                    for subscriber in subscribers:
                        await subscriber.ended.wait()
                unfinished = sum(not s.ended.is_set() for s in subscribers)
                ended = time.monotonic()
                cpu = sum(cpu_s(d.process.pid) for d in daemons) - sum(cpu_before)
                waits = [waited_s(d.process.pid) - w for d, w in zip(daemons, wait_before, strict=True)]
                model_cpu, own_cpu = cpu_s(model.pid) - model_before, time.process_time() - own_before
                proxy_cpu = cpu_s(proxy.pid) - proxy_before if proxy is not None else 0.0
                tg.cancel_scope.cancel()
        finally:
            for process in [proxy, *(d.process for d in daemons)]:
                if process is not None and process.returncode is None:
                    process.terminate()
            with anyio.move_on_after(15, shield=True):
                for process in [proxy, *(d.process for d in daemons)]:
                    if process is not None:
                        await process.wait()
            for process in [proxy, *(d.process for d in daemons)]:
                if process is not None and process.returncode is None:
                    process.kill()
    delays = [d * 1000 for s in subscribers for d in s.delays]
    offered, delivered, window_s, spread_s = delivery(subscribers)
    overlapped = window_s > 0
    if not overlapped:  # the last stream started after the first ended: the rate over the whole run instead
        reads = [t + d / 1000 for s in subscribers for t, d in zip(s.stamps, s.delays, strict=True)]
        first = min((t for s in subscribers for t in s.stamps), default=0.0)
        delivered = len(delays) / (max(reads) - first) if reads else float("nan")
    spans = [(a, b) for d in daemons for a, b, _ in d.counted]
    stalls = [worst_stall(d.probe_file, started, ended, spans)[0] for d in daemons]
    objects = [(s - b) / h if h else float("nan") for s, b, h in zip(streaming, base, held, strict=True)]
    idle_objects = [(i - b) / h if h else float("nan") for i, b, h in zip(idle, base, held, strict=True)]
    shutil.rmtree(tmp, ignore_errors=True)
    wall = ended - started
    notes = (
        f"over the {wall:.1f}s: serve processes {cpu:.2f} CPU-s, HAProxy {proxy_cpu:.2f}, endpoint {model_cpu:.2f}, "
        f"subscribers (this process) {own_cpu:.2f} ({own_cpu / wall:.0%} of one core)"
    )
    failures = [
        *([f"{len(cut)} event streams cut before their turn ended"] if cut else []),
        *([f"{len(refused)} prompts refused (statuses {sorted(set(refused))})"] if refused else []),
        *([f"{unfinished} turns not ended in time"] if unfinished else []),
        *([] if overlapped else ["the streams never all ran at once (delivered: over the whole run)"]),
    ]
    result = Result(
        name, processes, len(delays), sessions * words, delivered, offered, window_s,
        cpu / (len(delays) / 1000) if delays else float("nan"),
        statistics.median(delays) if delays else float("nan"),
        percentile(delays, 0.99) if delays else float("nan"),
        stalls, objects, idle_objects, held, notes, failures,
    )  # fmt: skip
    print(f"  sessions per process: {' / '.join(map(str, held))}")
    over = f"over the {window_s:.1f}s all streams ran" if overlapped else "over the whole run"
    print(
        f"  chunks: {result.received:,} of {result.expected:,} received; offered {offered:,.0f}/s, delivered "
        f"{delivered:,.0f}/s {over} (first chunks spread over {spread_s:.2f}s)"
    )
    for failure in failures:
        print(f"  FAILURE: {failure}")
    print(f"  CPU: {result.cpu_per_1000:.3f} CPU-s per 1,000 chunks (serve processes); {notes}")
    print(f"  endpoint write → subscriber read: p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms")
    print(
        f"  longest event-loop stall per process: {' / '.join(f'{s:.1f}' for s in stalls)} ms; each loop thread "
        f"waited for a CPU {' / '.join(f'{w:.1f}' for w in waits)} s of the {wall:.1f}s (the machine's load)"
    )
    print(
        f"  objects per streaming session per process: {' / '.join(f'{o:,.0f}' for o in objects)} "
        f"(of which before its prompt, subscriber attached: {' / '.join(f'{o:,.0f}' for o in idle_objects)})",
        flush=True,
    )
    return result


def verdict(result: Result, sessions: int, rate: float) -> str:
    checks = {
        "all delivered": not result.failures
        and result.received == result.expected
        and result.delivered >= 0.98 * sessions * rate,
        f"p99 <= {TARGET_P99_MS:g} ms": result.p99_ms <= TARGET_P99_MS,
        f"stall <= {TARGET_STALL_MS:g} ms": max(result.stalls_ms) <= TARGET_STALL_MS,
    }
    return ", ".join(f"{name}: {'met' if ok else 'MISSED'}" for name, ok in checks.items())


async def main(sessions: int, rate: float, seconds: float, processes: list[int], no_persist: bool) -> None:
    command = (
        f"python bench/bench_daemon_scale.py --sessions {sessions} --rate {rate:g} --seconds {seconds:g} "
        f"--processes {','.join(map(str, processes))}{' --no-persist' if no_persist else ''}"
    )
    print(f"command: {command}")
    print(
        f"targets at 2 processes: all {sessions * rate:,.0f} chunks/s delivered, p99 write → read <= "
        f"{TARGET_P99_MS:g} ms, longest stall per process <= {TARGET_STALL_MS:g} ms"
    )
    store = "--no-persist" if no_persist else "one shared --state-dir (SQLite)"
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs (shared), load {load[0]:.1f}, Python {sys.version.split()[0]}; {store}")
    plan = [(1, False)] + [(n, True) for n in processes]
    if HAPROXY is None:
        print("haproxy is not installed (apt-get install haproxy): the HAProxy configurations are skipped")
        plan = plan[:1]
    results = [await run_configuration(n, proxied, sessions, rate, seconds, no_persist) for n, proxied in plan]
    print()
    print(
        "| configuration | delivered chunks/s | CPU-s per 1,000 | p99 ms | longest stall per process ms "
        "| objects per session |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        stalls = " / ".join(f"{s:.0f}" for s in r.stalls_ms)
        objects = " / ".join(f"{o:,.0f}" for o in r.objects)
        print(f"| {r.name} | {r.delivered:,.0f} | {r.cpu_per_1000:.3f} | {r.p99_ms:.0f} | {stalls} | {objects} |")
    for r in results:
        if r.processes == 2 and "HAProxy" in r.name:
            print(f"targets at 2 processes: {verdict(r, sessions, rate)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--processes", type=parse_processes, default=[1, 2, 4], help="e.g. 1,2,4")
    parser.add_argument("--no-persist", action="store_true", help="serve processes without a store")
    args = parser.parse_args()
    anyio.run(main, args.sessions, args.rate, args.seconds, args.processes, args.no_persist)
