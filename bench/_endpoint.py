"""``bench/_model_server.py`` as a child process: its base URL, the arrival of each chat request it reports (and,
with ``--report-done``, the end of each response; with ``--script``, the tool calls it is told to make)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import Process

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_model_server.py")
STAMP_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_stamp_server.py")


class ModelProcess:
    """The endpoint's process: ``base_url``, ``pid``, ``next_request()`` (arrival instant, message count),
    ``next_event()`` (any reported line) and ``script(*paths)`` (the next prompt's ``read_file`` rounds)."""

    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.pid = process.pid
        self._stdout = process.stdout
        self._buffer = b""
        self.base_url = ""

    async def _line(self) -> str:
        while b"\n" not in self._buffer:
            self._buffer += await self._stdout.receive()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    async def start(self) -> None:
        with anyio.fail_after(30):
            kind, url = (await self._line()).split()
        assert kind == "url", kind
        self.base_url = url

    async def next_request(self) -> tuple[float, int]:
        kind, at, messages = (await self._line()).split()
        assert kind == "request", kind
        return float(at), int(messages)

    async def next_event(self) -> tuple[str, float, int]:
        """``("request", arrival, messages)`` or ``("done", end of the response, -1)``, in the order they happened."""
        kind, at, *rest = (await self._line()).split()
        assert kind in ("request", "done"), kind
        return kind, float(at), int(rest[0]) if rest else -1

    async def script(self, *paths: str) -> None:
        """Queue one ``read_file`` call per path, then an answer (``--script``); returns once the model has them.

        Every event reported before must have been read (the acknowledgement is the next line)."""
        assert self.process.stdin is not None
        await self.process.stdin.send(" ".join(("script", *paths)).encode() + b"\n")
        kind, queued = (await self._line()).split()
        assert kind == "scripted" and int(queued) == len(paths) + 1, (kind, queued)


@asynccontextmanager
async def model_process(*args: str, server: str = SERVER) -> AsyncIterator[ModelProcess]:
    """Start the endpoint (``args`` as for ``server``, by default ``_model_server.py``); stop it by closing its
    stdin on exit."""
    command = [sys.executable, server, *args]
    async with await anyio.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None) as proc:
        model = ModelProcess(proc)
        await model.start()
        try:
            yield model
        finally:
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with anyio.move_on_after(10):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
