"""``acp-server ask TEXT``: a thin ACP client for the shell. It spawns ``acp-server`` over real pipes and prints
the streamed answer on stdout (reasoning, tool calls and the model's plan on stderr, dimmed on a terminal).

Invariants: stdout carries the answer only, ended by a newline as soon as the turn ends (before anything else
can print); a turn that fails before any answer text leaves stdout empty; the error goes to stderr, exit 1. The
client offers no ``fs``/``terminal`` capability, so the agent runs its tools locally, in the current directory; a
permission request is answered y/N on the terminal, and declined when stdin is not one.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import Process

from ..rpc import DEFAULT_MAX_LINE_BYTES, decode_line, iter_lines

__all__ = ["ask"]


class _AskError(Exception):
    pass


def _ask_permission(update: dict[str, Any]) -> bool:
    """y/N on the terminal (stdin and stderr both ttys); anything else declines."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    title = update.get("title") or "this tool call"
    sys.stderr.write(f"  allow {title}? [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


class _Client:
    def __init__(self, process: Process, display: _Display) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._lines = iter_lines(self._receive, DEFAULT_MAX_LINE_BYTES)
        self._next_id = 0
        self._display = display

    async def _receive(self) -> bytes:
        assert self._process.stdout is not None
        try:
            return await self._process.stdout.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return b""

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send(json.dumps(message).encode() + b"\n")

    async def _answer(self, incoming: dict[str, Any]) -> None:
        """Answer the agent's request: a permission (asked on the terminal); nothing else is offered."""
        method = incoming.get("method")
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": incoming.get("id")}
        if method == "session/request_permission":
            params = incoming.get("params") or {}
            tool_call = params.get("toolCall") if isinstance(params, dict) else None
            allowed = await anyio.to_thread.run_sync(_ask_permission, tool_call if isinstance(tool_call, dict) else {})
            self._display.permission(allowed)
            option = "allow_once" if allowed else "reject_once"
            reply["result"] = {"outcome": {"outcome": "selected", "optionId": option}}
        else:
            reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        await self._send(reply)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        request_id = self._next_id
        await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        async for line in self._lines:
            if not isinstance(line, bytes):
                continue
            incoming = decode_line(line)
            if incoming.get("method") == "session/update":
                self._display.show(incoming["params"]["update"])
            elif "method" in incoming and "id" in incoming:
                await self._answer(incoming)
            elif incoming.get("id") == request_id:
                if "error" in incoming:
                    raise _AskError(incoming["error"].get("message", "request failed"))
                return incoming.get("result")
        raise _AskError("acp-server exited before answering (see its log above)")


_PLAN_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


class _Display:
    """Where the streamed text went: answer to stdout, reasoning to stderr (dimmed on a terminal)."""

    def __init__(self) -> None:
        self.thinking = False  # reasoning printed and not yet ended by a newline
        self.answered = False  # answer text printed
        self.answer_open = False  # the answer does not end with a newline yet
        self.titles: dict[object, str] = {}  # calls announced and not shown yet, by id

    def _note(self, text: str) -> None:
        """A line on stderr about the turn (a tool call), on its own line, dimmed on a terminal."""
        self._end_thinking()
        if self.answer_open:
            self.answer_open = False
            sys.stdout.write("\n")
            sys.stdout.flush()
        dim, reset = ("\x1b[2m", "\x1b[0m") if sys.stderr.isatty() else ("", "")
        sys.stderr.write(f"{dim}{text}{reset}\n")
        sys.stderr.flush()

    def permission(self, allowed: bool) -> None:
        self._note("  allowed" if allowed else "  declined (run with --mode accept-edits or answer y on a terminal)")

    def _tool_call(self, update: dict[str, Any]) -> None:
        """One line per call, once its title is whole: a call shown while it streams is titled by its tool's verb
        alone until a ``tool_call_update`` titles it (or it changes status)."""
        kind, call_id, title = update.get("sessionUpdate"), update.get("toolCallId"), update.get("title")
        if kind == "tool_call":
            self.titles[call_id] = title or "tool call"
        elif isinstance(title, str) and title:
            self.titles[call_id] = title
        if call_id in self.titles and (kind == "tool_call_update" and (title or update.get("status"))):
            self._note(f"→ {self.titles.pop(call_id)}")
        if update.get("status") == "failed":
            texts = [
                block.get("content", {}).get("text", "")
                for block in update.get("content") or []
                if isinstance(block, dict) and isinstance(block.get("content"), dict)
            ]
            self._note(f"  failed: {' '.join(t for t in texts if t) or 'see the log'}")

    def _plan(self, update: dict[str, Any]) -> None:
        """The whole plan as a checklist, each time it changes: ``[x]`` completed, ``[>]`` in progress, ``[ ]``
        pending."""
        lines = ["Plan:"]
        for entry in update.get("entries") or []:
            if isinstance(entry, dict):
                mark = _PLAN_MARKS.get(str(entry.get("status")), "[ ]")
                lines.append(f"  {mark} {entry.get('content', '')}")
        self._note("\n".join(lines))

    def show(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in ("tool_call", "tool_call_update"):
            self._tool_call(update)
            return
        if kind == "plan":
            self._plan(update)
            return
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


async def ask(
    text: str,
    server_args: Sequence[str],
    env: dict[str, str],
    mode: str = "read-only",
    mcp_servers: Sequence[dict[str, Any]] = (),
) -> int:
    """Ask one question (the session connected to ``mcp_servers``, ACP's shape); exit code 0 when the turn ended
    normally, 1 with the error's message otherwise."""
    command = [sys.executable, "-m", "acp_server", *server_args]
    display = _Display()
    async with await anyio.open_process(command, stderr=None, env=env) as process:
        client = _Client(process, display)
        try:
            await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            session = await client.request("session/new", {"cwd": os.getcwd(), "mcpServers": list(mcp_servers)})
            current = (session.get("modes") or {}).get("currentModeId")
            if current != mode:
                await client.request("session/set_mode", {"sessionId": session["sessionId"], "modeId": mode})
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
