"""``acp-server setup`` on a real pseudo-terminal, for the tests that type into it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import termios
from collections.abc import Sequence

import anyio

__all__ = ["Terminal", "clean_env"]


def clean_env() -> dict[str, str]:
    """The test runner's environment without the agent's settings (no model, no key)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}


class Terminal:
    """``acp-server setup`` on a real pseudo-terminal (its controlling terminal: Ctrl-C is a SIGINT); ``command``
    runs the agent another way (e.g. through uvx), ``env`` replaces the environment."""

    def __init__(
        self,
        *args: str,
        command: Sequence[str] = (sys.executable, "-m", "acp_server"),
        env: dict[str, str] | None = None,
    ) -> None:
        self.master, slave = os.openpty()

        def controlling_terminal() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen(
            [*command, "setup", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=clean_env() if env is None else env,
            start_new_session=True,
            preexec_fn=controlling_terminal,
        )
        os.close(slave)
        self.seen = b""

    async def expect(self, text: str) -> None:
        while text.encode() not in self.seen:
            try:
                chunk = await anyio.to_thread.run_sync(os.read, self.master, 4096)
            except OSError:  # EIO: the terminal's other side is closed
                chunk = b""
            if not chunk:
                raise AssertionError(f"{text!r} never came: {self.seen.decode(errors='replace')}")
            self.seen += chunk

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        """A test that failed half-way: its process is ended (killed: it may be waiting for an answer)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self.master)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    async def finish(self) -> int:
        while True:
            try:
                chunk = await anyio.to_thread.run_sync(os.read, self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk
        return await anyio.to_thread.run_sync(self.process.wait)
