"""Three real ``acp-server serve`` processes on one store (a shared SQLite state directory, or PostgreSQL) behind a
real HAProxy running ``deploy/haproxy.cfg``: new sessions and ``/acp`` connections spread, every later request
reaches the process that holds what it names, and a process killed with SIGKILL mid-stream leaves its sessions to
the others (resumed from the store, the finished turn kept, the event stream's reader told ``resync_required``);
HTTP/2 is HAProxy's (TLS with ``alpn h2,http/1.1``, a throwaway self-signed certificate): the REST face, an event
stream and ``/acp`` over h2 through it, the daemons speaking HTTP/1.1 only. Skips when ``haproxy`` is not installed
(and the PostgreSQL runs when PostgreSQL is not)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from acp import connect_to_agent, text_block
from acp.http import create_http_stream
from acp.schema import AgentMessageChunk
from anyio.abc import Process

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip
from acp_server.store import open_store

HAPROXY = shutil.which("haproxy")
OPENSSL = shutil.which("openssl")  # the throwaway certificate of HAProxy's TLS bind
CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"
DAEMONS = 3
OPENSSL_SELF_SIGNED = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
OPENSSL_SELF_SIGNED += ["-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed (.ci/run installs it from Debian)"),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_args(request: pytest.FixtureRequest) -> list[str]:
    """The daemons' shared store: one SQLite state directory (one machine), or one PostgreSQL database."""
    if request.param == "sqlite":
        return []
    return ["--store", str(request.getfixturevalue("pg_dsn"))]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Daemon:
    name: str  # the server's name in deploy/haproxy.cfg
    process: Process
    url: str = ""
    stderr: bytearray = field(default_factory=bytearray)


@dataclass
class Cluster:
    url: str  # HAProxy's
    daemons: list[Daemon]
    admin: Path  # HAProxy's runtime API socket
    state: Path
    tls_url: str  # HAProxy's TLS bind (h2 or HTTP/1.1 by ALPN); "" without openssl
    tls: ssl.SSLContext | None  # a client's, trusting the cluster's throwaway certificate

    async def admin_command(self, command: str) -> str:
        async with await anyio.connect_unix(str(self.admin)) as stream:
            await stream.send(command.encode() + b"\n")
            answer = bytearray()
            try:
                while True:
                    answer += await stream.receive()
            except anyio.EndOfStream:
                return answer.decode()

    async def holder(self, key: str) -> Daemon:
        """The daemon HAProxy's stick table sends ``key`` (a session or an /acp connection) to."""
        table = await self.admin_command(f"show table daemons key {key}")
        found = re.search(r"server_id=(\d+)", table)
        assert found is not None, table
        return self.daemons[int(found.group(1)) - 1]

    def by_name(self, name: str) -> Daemon:
        return next(daemon for daemon in self.daemons if daemon.name == name)


async def _drain(daemon: Daemon, announced: anyio.Event) -> None:
    """Read the daemon's stderr to its end (a full pipe would block it), noting the announced URL."""
    assert daemon.process.stderr is not None
    async for data in daemon.process.stderr:
        daemon.stderr += data
        found = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"(\S+)\n", daemon.stderr)
        if found and not daemon.url:
            daemon.url = found.group(1).decode()
            announced.set()


async def _keep(process: Process, output: bytearray) -> None:
    assert process.stderr is not None
    async for data in process.stderr:
        output += data


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll a real process's state, bounded: 600 looks 50 ms apart (HAProxy's health checks run each second)."""
    for _ in range(600):
        if await check():
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"still not {what} after 30 s")


async def _status(cluster: Cluster) -> dict[str, str]:
    """Each server's state as HAProxy's health checks see it (``UP``, ``UP 1/2`` going down, ``DOWN``…)."""
    rows = (await cluster.admin_command("show stat")).splitlines()
    header = rows[0].lstrip("# ").split(",")
    status, name = header.index("status"), header.index("svname")
    cells = [row.split(",") for row in rows[1:] if row.count(",") > status]
    return {c[name]: c[status] for c in cells if c[name] not in ("BACKEND", "FRONTEND")}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 (openssl, as on any Debian host): HAProxy's PEM (certificate and key in
    one file), and the certificate alone for the client to trust."""
    key, cert, both = directory / "key.pem", directory / "cert.pem", directory / "cert-and-key.pem"
    subprocess.run(
        [*OPENSSL_SELF_SIGNED, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    both.write_bytes(cert.read_bytes() + key.read_bytes())
    return both, cert


@asynccontextmanager
async def cluster(tmp_path: Path, model: LoopbackModel, store_args: list[str]) -> AsyncIterator[Cluster]:
    """HAProxy in front of :data:`DAEMONS` serve processes sharing one store; every process is killed at the end."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg")}
    state = tmp_path / "state"
    daemons: list[Daemon] = []
    haproxy: Process | None = None
    output = bytearray()  # HAProxy's
    admin = Path(tempfile.mkdtemp(prefix="haproxy-")) / "admin.sock"  # a unix socket path has at most 107 bytes
    async with anyio.create_task_group() as tg:
        try:
            for index in range(1, DAEMONS + 1):
                command = [sys.executable, "-m", "acp_server", "serve", "--port", "0", "--base-url", model.base_url]
                command += ["--api-key", "k", "--model", "m", "--state-dir", str(state), *store_args]
                process = await anyio.open_process(command, env=env, stdin=None, stdout=None)
                daemon = Daemon(f"daemon{index}", process)
                daemons.append(daemon)
                announced = anyio.Event()
                tg.start_soon(_drain, daemon, announced)
                with anyio.fail_after(30):
                    await announced.wait()
            (tmp_path / "admin.cfg").write_text(f"global\n    stats socket {admin} level admin\n")
            listen = f"127.0.0.1:{_free_port()}"
            tls_env: dict[str, str] = {}
            tls_url, tls = "", None
            if OPENSSL is not None:
                pem, cert = _self_signed(tmp_path)
                tls_env = {"ACP_LISTEN_TLS": f"127.0.0.1:{_free_port()}", "ACP_TLS_CERT": str(pem)}
                tls_url, tls = f"https://{tls_env['ACP_LISTEN_TLS']}", ssl.create_default_context(cafile=str(cert))
            addresses = {f"ACP_DAEMON_{i}": d.url.removeprefix("http://") for i, d in enumerate(daemons, 1)}
            haproxy = await anyio.open_process(
                [str(HAPROXY), "-db", "-f", str(CONFIG), "-f", str(tmp_path / "admin.cfg")],
                env={**env, "ACP_LISTEN": listen, **tls_env, **addresses},
                stdin=None,
                stdout=None,
            )
            tg.start_soon(_keep, haproxy, output)
            served = Cluster(f"http://{listen}", daemons, admin, state, tls_url, tls)

            async def all_up() -> bool:
                assert haproxy is not None and haproxy.returncode is None, output.decode()
                return admin.exists() and await _status(served) == {d.name: "UP" for d in daemons}

            await _until(all_up, "every daemon up")
            yield served
        finally:
            for process in [haproxy, *(d.process for d in daemons)]:
                if process is not None and process.returncode is None:
                    process.kill()
            with anyio.CancelScope(shield=True):
                for process in [haproxy, *(d.process for d in daemons)]:
                    if process is not None:
                        await process.wait()
            tg.cancel_scope.cancel()
            shutil.rmtree(admin.parent, ignore_errors=True)


async def _new_session(client: httpx2.AsyncClient, cwd: Path) -> str:
    created = await client.post("/session", json={"cwd": str(cwd)})
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    assert created.headers["location"] == f"/session/{session_id}"
    return session_id


async def _prompt(client: httpx2.AsyncClient, session_id: str, text: str) -> httpx2.Response:
    body = {"prompt": [{"type": "text", "text": text}]}
    return await client.post(f"/session/{session_id}/prompt", params={"wait": "true"}, json=body)


async def test_new_sessions_spread_and_every_request_reaches_the_process_holding_its_session(
    tmp_path: Path, store_args: list[str]
) -> None:
    async with LoopbackModel() as model:
        model.enqueue(*(Answer(text=f"answer {n}") for n in range(18)))
        async with (
            cluster(tmp_path, model, store_args) as served,
            httpx2.AsyncClient(base_url=served.url, timeout=20) as client,
        ):
            sessions = [await _new_session(client, tmp_path) for _ in range(9)]
            holders = {session_id: (await served.holder(session_id)).name for session_id in sessions}
            assert len(set(holders.values())) >= 2, holders  # spread over the processes
            for session_id in sessions:
                for _ in range(2):  # a process that does not hold the session answers 404 session_not_found
                    answered = await _prompt(client, session_id, "hello")
                    assert answered.status_code == 200, answered.text
                    assert answered.json()["stopReason"] == "end_turn"
                assert (await served.holder(session_id)).name == holders[session_id]


async def test_admission_through_the_balancer_is_exact_under_concurrent_prompts(
    tmp_path: Path, store_args: list[str]
) -> None:
    """Seven prompts at once for one session, through HAProxy: they all reach the one process that holds its queue,
    which admits five (the limit) and refuses two with 503 and Retry-After, as without a balancer."""
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.05, text="slow " * 2000))  # the first turn outlasts the seven POSTs
        async with (
            cluster(tmp_path, model, store_args) as served,
            httpx2.AsyncClient(base_url=served.url, timeout=20) as client,
        ):
            session_id = await _new_session(client, tmp_path)
            answers: list[httpx2.Response] = []

            async def post(n: int) -> None:
                body = {"prompt": [{"type": "text", "text": f"prompt {n}"}]}
                answers.append(await client.post(f"/session/{session_id}/prompt", json=body))

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    for n in range(7):
                        tg.start_soon(post, n)
            assert sorted(answer.status_code for answer in answers) == [202] * 5 + [503] * 2, [a.text for a in answers]
            for refused in (answer for answer in answers if answer.status_code == 503):
                assert refused.headers["Retry-After"] == "5"
                assert refused.json()["code"] == "prompt_queue_full"
                assert (refused.json()["limit"], refused.json()["pendingCount"]) == (5, 5)
            cancelled = await client.post(f"/session/{session_id}/cancel")
            assert cancelled.status_code == 204


class _Recorder:
    def __init__(self) -> None:
        self.text = ""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            self.text += update.content.text

    def on_connect(self, conn: Any) -> None:
        pass


async def test_acp_connections_spread_and_each_stays_on_its_process(tmp_path: Path, store_args: list[str]) -> None:
    """The official SDK's Streamable HTTP client: each connection's POSTs and streams carry ``Acp-Connection-Id``;
    a process that does not hold the connection answers 404, so a finished prompt proves the routing."""
    async with LoopbackModel() as model:
        model.enqueue(*(Answer(text=f"over acp {n}") for n in range(6)))
        async with cluster(tmp_path, model, store_args) as served:
            holders: set[str] = set()
            for n in range(6):
                recorder = _Recorder()
                http = httpx.AsyncClient(timeout=httpx.Timeout(20))
                seen: list[str] = []

                async def note(response: httpx.Response, seen: list[str] = seen) -> None:
                    if "acp-connection-id" in response.headers:
                        seen.append(response.headers["acp-connection-id"])

                http.event_hooks["response"].append(note)
                conn = connect_to_agent(recorder, create_http_stream(f"{served.url}/acp", client=http))
                try:
                    with anyio.fail_after(20):
                        await conn.initialize(protocol_version=1)
                        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
                finally:
                    await conn.close()
                    await http.aclose()
                assert answer.stop_reason == "end_turn"
                assert recorder.text == f"over acp {n}"
                holders.add((await served.holder(seen[0])).name)
            assert len(holders) >= 2, holders


async def test_a_killed_process_leaves_its_sessions_to_the_others_with_the_finished_turn_kept(
    tmp_path: Path, store_args: list[str]
) -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="kept answer"), SlowDrip(interval_s=0.05, text="word " * 2000), Answer(text="again"))
        async with cluster(tmp_path, model, store_args) as served:
            async with httpx2.AsyncClient(base_url=served.url, timeout=20) as client:
                session_id = await _new_session(client, tmp_path)
                assert (await _prompt(client, session_id, "first")).json()["stopReason"] == "end_turn"
                owner = await served.holder(session_id)
                last_id = 0
                with anyio.fail_after(20):
                    async with client.stream("GET", f"/session/{session_id}/events") as events:
                        started = await client.post(
                            f"/session/{session_id}/prompt", json={"prompt": [{"type": "text", "text": "long"}]}
                        )
                        assert started.status_code == 202, started.text
                        lines = events.aiter_lines()
                        async for line in lines:  # until the long answer streams
                            if line.startswith("id:"):
                                last_id = int(line[3:])
                            if line.startswith("data:") and "word" in line:
                                break
                        owner.process.send_signal(signal.SIGKILL)
                        await owner.process.wait()
                        try:  # the stream ends with the process (cut short: HAProxy cannot finish the chunks)
                            async for _ in lines:
                                pass
                        except httpx2.HTTPError:
                            pass
                assert last_id > 0

                async def owner_down() -> bool:
                    return (await _status(served))[owner.name] == "DOWN"

                await _until(owner_down, f"{owner.name} down")  # HAProxy's health checks notice the death
            # A client reconnects: the connections it had through the balancer went down with the process's.
            async with httpx2.AsyncClient(base_url=served.url, timeout=20) as client:
                resumed = await client.post(f"/session/{session_id}/resume", json={})
                assert resumed.status_code == 200, (resumed.text, [bytes(d.stderr[-3000:]) for d in served.daemons])
                heir = await served.holder(session_id)
                assert heir is not owner
                with anyio.fail_after(20):
                    async with client.stream(
                        "GET", f"/session/{session_id}/events", headers={"Last-Event-ID": str(last_id)}
                    ) as events:
                        lines = events.aiter_lines()
                        first = [await anext(lines), await anext(lines)]
                assert "event: resync_required" in first, first  # the events it missed are not replayed silently
                again = await _prompt(client, session_id, "second")
                assert again.json()["stopReason"] == "end_turn", again.text
    url = store_args[1] if store_args else None
    async with open_store(served.state, url=url) as store:
        snapshot = await store.read_session(session_id)
    assert snapshot is not None
    contents = [(message.role, message.content) for message in snapshot.messages]
    assert contents[:2] == [("user", "first"), ("assistant", "kept answer")]
    assert contents[-2:] == [("user", "second"), ("assistant", "again")]
    assert json.dumps(contents).count("kept answer") == 1


@pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed (it makes the TLS bind's certificate)")
async def test_http2_is_the_proxys_rest_an_event_stream_and_acp_over_h2_through_haproxy(tmp_path: Path) -> None:
    """The daemons serve HTTP/1.1 only; a client that offers h2 by ALPN to HAProxy's TLS bind gets HTTP/2 for every
    route: the REST face, a session's event stream (one connection carrying it and the prompt beside it) and the
    official SDK's Streamable HTTP ``/acp``."""
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="over h2"), Answer(text="acp over h2"))
        async with (
            cluster(tmp_path, model, []) as served,
            httpx.AsyncClient(http2=True, verify=served.tls or True, base_url=served.tls_url, timeout=20) as client,
        ):
            assert served.tls is not None
            health = await client.get("/health")
            assert (health.http_version, health.status_code) == ("HTTP/2", 200)
            created = await client.post("/session", json={"cwd": str(tmp_path)})
            assert (created.http_version, created.status_code) == ("HTTP/2", 201)
            session_id = created.json()["sessionId"]
            text = ""
            with anyio.fail_after(20):
                async with client.stream("GET", f"/session/{session_id}/events") as events:
                    assert events.http_version == "HTTP/2"
                    body = {"prompt": [{"type": "text", "text": "hi"}]}
                    accepted = await client.post(f"/session/{session_id}/prompt", json=body)
                    assert accepted.status_code == 202, accepted.text
                    event = ""
                    async for line in events.aiter_lines():
                        if line.startswith("event: "):
                            event = line.removeprefix("event: ")
                        elif line.startswith("data: ") and event == "session_update":
                            update = json.loads(line.removeprefix("data: "))["update"]
                            if update["sessionUpdate"] == "agent_message_chunk":
                                text += update["content"]["text"]
                        elif event == "turn_complete":
                            break
            assert text == "over h2"

            versions: set[str] = set()

            async def note(response: httpx.Response) -> None:
                versions.add(response.http_version)

            http = httpx.AsyncClient(http2=True, verify=served.tls, timeout=httpx.Timeout(20))
            http.event_hooks["response"].append(note)
            recorder = _Recorder()
            conn = connect_to_agent(recorder, create_http_stream(f"{served.tls_url}/acp", client=http))
            try:
                with anyio.fail_after(20):
                    await conn.initialize(protocol_version=1)
                    session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                    answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
            finally:
                await conn.close()
                await http.aclose()
            assert (answer.stop_reason, recorder.text) == ("end_turn", "acp over h2")
            assert versions == {"HTTP/2"}
