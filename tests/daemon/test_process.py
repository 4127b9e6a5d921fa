"""``acp-server serve`` as a process: the URL line, refusing to start, signals → graceful exit 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from anyio.abc import Process

from acp_server.daemon import ANNOUNCE_PREFIX, bind_socket, url_of
from acp_server.provider.offline import LoopbackModel, SlowDrip

from ._support import TEXT, EventReader

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

COMMAND = [sys.executable, "-m", "acp_server", "serve"]
URL_LINE = re.compile(re.escape(ANNOUNCE_PREFIX) + r"(http://\S+)\n")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    return {**env, **extra}


class Served:
    def __init__(self, process: Process) -> None:
        self.process = process
        self.stderr = bytearray()
        self.url = ""

    async def read_url(self) -> str:
        assert self.process.stderr is not None
        with anyio.fail_after(15):
            async for chunk in self.process.stderr:
                self.stderr += chunk
                match = URL_LINE.search(self.stderr.decode(errors="replace"))
                if match:
                    self.url = match.group(1)
                    return self.url
        raise AssertionError(f"no URL line; stderr: {self.stderr.decode(errors='replace')}")

    async def drain_stderr(self) -> str:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk
        return self.stderr.decode(errors="replace")


@asynccontextmanager
async def serve(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Served]:
    process = await anyio.open_process([*COMMAND, *args], env=env or clean_env(), stdin=subprocess.DEVNULL)
    async with process:
        try:
            yield Served(process)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
async def test_a_signal_cancels_the_running_turn_ends_the_streams_and_exits_zero(how: signal.Signals) -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="word " * 5000))
        async with serve("--base-url", model.base_url, "--model", "m", "--port", "0") as served:
            url = await served.read_url()
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
            async with httpx2.AsyncClient(base_url=url, timeout=10) as client:
                session_id = (await client.post("/session", json={"cwd": "/tmp"})).json()["sessionId"]
                async with client.stream("GET", f"/session/{session_id}/events") as stream:
                    events = EventReader(stream)
                    waiting = await client.post(f"/session/{session_id}/prompt", json={"prompt": TEXT})
                    assert waiting.status_code == 202
                    await events.until(lambda e: e.event == "session_update")
                    served.process.send_signal(how)
                    rest = await events.until_ended(timeout=10)
            assert rest[-1].event == "turn_complete"
            assert rest[-1].data["stopReason"] == "cancelled"
            with anyio.fail_after(10):
                assert await served.process.wait() == 0
            await model.wait_for_disconnects(1)  # the model request was torn down
            assert served.stderr.decode().count(ANNOUNCE_PREFIX) == 1


async def test_a_public_address_without_a_token_refuses_to_start() -> None:
    async with serve("--offline", "--host", "0.0.0.0", "--port", "0") as served:
        with anyio.fail_after(15):
            code = await served.process.wait()
        stderr = await served.drain_stderr()
    assert code == 2
    assert "refusing to listen on 0.0.0.0 (not a loopback address) without a token" in stderr
    assert "--token" in stderr and "ACP_SERVER_TOKEN" in stderr
    assert ANNOUNCE_PREFIX not in stderr


async def test_a_public_address_with_a_token_from_the_environment_starts_and_requires_it() -> None:
    token = "env-token-abcdefghijklmnop"
    env = clean_env(ACP_SERVER_TOKEN=token, ACP_SERVER_MAX_PENDING_PROMPTS_PER_SESSION="0")
    async with serve("--offline", "--host", "0.0.0.0", "--port", "0", env=env) as served:
        url = await served.read_url()
        assert url.startswith("http://0.0.0.0:")
        local = url.replace("0.0.0.0", "127.0.0.1")
        async with httpx2.AsyncClient(base_url=local, timeout=10) as client:
            assert (await client.get("/health")).status_code == 200
            assert (await client.get("/capabilities")).status_code == 401
            capabilities = await client.get("/capabilities", headers={"Authorization": f"Bearer {token}"})
            assert capabilities.json()["limits"]["maxPendingPromptsPerSession"] is None  # 0 → unlimited → null
        served.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            assert await served.process.wait() == 0
        assert token not in await served.drain_stderr()


async def test_a_busy_port_exits_1_with_a_message() -> None:
    with bind_socket("127.0.0.1", 0) as taken:
        port = url_of(taken).rsplit(":", 1)[1]
        async with serve("--offline", "--port", port) as served:
            with anyio.fail_after(15):
                code = await served.process.wait()
            stderr = await served.drain_stderr()
    assert code == 1
    assert f"acp-server serve: cannot listen on 127.0.0.1:{port}" in stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "invalid value for --port"),
        (["--event-ring-size", "0"], "invalid value for --event-ring-size"),
        (["--allow-origin", "ui.example"], "invalid value for --allow-origin"),
        (["--token", ""], "invalid value for --token: *** (must not be empty or blank)"),
        (["--token", " \t "], "invalid value for --token: *** (must not be empty or blank)"),
        (["--allow-origin", "*"], "refusing --allow-origin '*' without a token"),
        (["--max-connections", "0"], "invalid value for --max-connections"),
        (["--header-timeout-ms", "x"], "invalid value for --header-timeout-ms"),
    ],
)
async def test_invalid_serve_flags_are_usage_errors(args: list[str], message: str) -> None:
    extra = ["--host", "10.1.2.3"] if args[0] == "--token" else []
    async with serve("--offline", *args, *extra) as served:
        with anyio.fail_after(15):
            code = await served.process.wait()
        stderr = await served.drain_stderr()
    assert code == 2
    assert message in stderr


async def test_a_blank_token_from_the_environment_is_a_usage_error_naming_the_variable() -> None:
    env = clean_env(ACP_SERVER_TOKEN="   ")
    async with serve("--offline", "--host", "0.0.0.0", "--port", "0", env=env) as served:
        with anyio.fail_after(15):
            code = await served.process.wait()
        stderr = await served.drain_stderr()
    assert code == 2
    assert "invalid value for ACP_SERVER_TOKEN: *** (must not be empty or blank)" in stderr
    assert ANNOUNCE_PREFIX not in stderr
