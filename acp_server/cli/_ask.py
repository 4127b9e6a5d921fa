"""``acp-server ask TEXT``: a thin ACP client for the shell. It spawns ``acp-server`` over real pipes and prints
the streamed answer on stdout (reasoning on stderr, dimmed on a terminal).

Invariants: stdout carries the answer only, ended by a newline as soon as the turn ends (before anything else
can print); a turn that fails before any answer text leaves stdout empty; the error goes to stderr, exit 1.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import Process

from ..rpc import decode_line, iter_lines

__all__ = ["ask"]


class _AskError(Exception):
    pass


class _Client:
    def __init__(self, process: Process, display: _Display) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._lines = iter_lines(self._receive, 64 * 1024 * 1024)
        self._next_id = 0
        self._display = display

    async def _receive(self) -> bytes:
        assert self._process.stdout is not None
        try:
            return await self._process.stdout.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return b""

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self._process.stdin is not None
        self._next_id += 1
        request_id = self._next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self._process.stdin.send(json.dumps(message).encode() + b"\n")
        async for line in self._lines:
            if not isinstance(line, bytes):
                continue
            incoming = decode_line(line)
            if incoming.get("method") == "session/update":
                self._display.show(incoming["params"]["update"])
            elif incoming.get("id") == request_id:
                if "error" in incoming:
                    raise _AskError(incoming["error"].get("message", "request failed"))
                return incoming.get("result")
        raise _AskError("acp-server exited before answering (see its log above)")


class _Display:
    """Where the streamed text went: answer to stdout, reasoning to stderr (dimmed on a terminal)."""

    def __init__(self) -> None:
        self.thinking = False  # reasoning printed and not yet ended by a newline
        self.answered = False  # answer text printed
        self.answer_open = False  # the answer does not end with a newline yet

    def show(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        content = update.get("content") or {}
        text = content.get("text", "") if isinstance(content, dict) else ""
        if not isinstance(text, str) or not text:
            return
        if kind == "agent_message_chunk":
            self._end_thinking()
            sys.stdout.write(text)
            sys.stdout.flush()
            self.answered = True
            self.answer_open = not text.endswith("\n")
        elif kind == "agent_thought_chunk":
            self.thinking = True
            dim, reset = ("\x1b[2m", "\x1b[0m") if sys.stderr.isatty() else ("", "")
            sys.stderr.write(f"{dim}{text}{reset}")
            sys.stderr.flush()

    def _end_thinking(self) -> None:
        if self.thinking:
            self.thinking = False
            sys.stderr.write("\n")
            sys.stderr.flush()

    def end(self) -> None:
        """The turn is over: end the answer (and the reasoning) with a newline, writing nothing if there was none."""
        self._end_thinking()
        if self.answer_open:
            self.answer_open = False
            sys.stdout.write("\n")
            sys.stdout.flush()


async def ask(text: str, server_args: Sequence[str], env: dict[str, str]) -> int:
    """Ask one question; exit code 0 when the turn ended normally, 1 with the error's message otherwise."""
    command = [sys.executable, "-m", "acp_server", *server_args]
    display = _Display()
    async with await anyio.open_process(command, stderr=None, env=env) as process:
        client = _Client(process, display)
        try:
            await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            session = await client.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
            result = await client.request(
                "session/prompt", {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": text}]}
            )
        except _AskError as exc:
            display.end()
            print(f"acp-server ask: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            display.end()  # before the agent is told to exit: its last log lines come after the answer
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(5):
                await process.wait()
        stop_reason = result.get("stopReason") if isinstance(result, dict) else None
        if stop_reason not in ("end_turn", None):
            print(f"acp-server ask: turn ended with {stop_reason}", file=sys.stderr)
            return 1
        return 0
