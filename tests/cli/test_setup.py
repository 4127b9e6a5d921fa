"""``acp-server setup`` against a real OpenAI-compatible server (the offline model's loopback server), in a real
process: with ``--yes``, and interactively on a real pseudo-terminal. It lists the models and the window the listing
states, checks one streamed tool round trip and says plainly when tools do not work; it writes the file atomically,
mode 0600, keeping the file's other settings; Ctrl-C leaves the old file untouched; a typed key is never echoed."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import termios
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]  # starts acp_server as a process

KEY = "sk-typed-secret-987654321"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}


async def _setup(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process(
        [sys.executable, "-m", "acp_server", "setup", *args], env=_env(), check=False, stdin=subprocess.DEVNULL
    )


@asynccontextmanager
async def _model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as model:
        model.listed_models = [{"id": "coder", "max_model_len": 32768}, {"id": "chat", "meta": {"n_ctx": 4096}}]
        yield model


def _tool_round_trip(model: LoopbackModel) -> None:
    model.enqueue(ToolCalls((ScriptedCall("ping", {"text": "pong"}),)), Answer(text="pong received"))


async def test_yes_checks_the_tool_round_trip_and_writes_a_private_file(tmp_path: Path) -> None:
    config = tmp_path / "dir" / "config.toml"
    async with _model() as model:
        _tool_round_trip(model)
        done = await _setup("--config", str(config), "--base-url", model.base_url, "--yes")
        chats = [request.body for request in model.requests]
    out = done.stdout.decode()
    assert done.returncode == 0, (out, done.stderr)
    assert "lists 2 models" in out and "context window of 'coder': 32768 tokens" in out
    assert "✓ the model streams" in out and "✓ the model calls tools and answers their results" in out
    assert [body["stream"] for body in chats] == [True, True] and chats[1]["messages"][-1]["role"] == "tool"
    assert tomllib.loads(config.read_text()) == {"base-url": model.base_url, "model": "coder"}
    assert config.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in config.parent.iterdir()] == ["config.toml"]  # no temporary file left


async def test_a_model_without_tool_calling_is_said_plainly_with_what_to_change(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("max-turn-requests = 9\n")
    async with _model() as model:
        model.enqueue(Answer(text="I cannot call tools"))
        done = await _setup("--config", str(config), "--base-url", model.base_url, "--model", "chat", "--yes")
    out = done.stdout.decode()
    assert done.returncode == 0, (out, done.stderr)
    assert "context window of 'chat': 4096 tokens" in out
    assert "✗ the model answered without calling the tool" in out and "to change:" in out
    assert "without tool calling" in out
    assert tomllib.loads(config.read_text()) == {"max-turn-requests": 9, "base-url": model.base_url, "model": "chat"}


async def test_an_endpoint_that_does_not_answer_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    async with LoopbackModel() as model:
        url = model.base_url
    done = await _setup("--config", str(config), "--base-url", url, "--yes")  # closed: nothing listens there
    assert done.returncode == 1 and not config.exists()
    assert "nothing answers there" in done.stdout.decode() and b"Traceback" not in done.stderr


async def test_asking_questions_needs_a_terminal(tmp_path: Path) -> None:
    done = await _setup("--config", str(tmp_path / "c.toml"))
    assert done.returncode == 2 and b"--yes" in done.stderr and not (tmp_path / "c.toml").exists()


class Terminal:
    """``acp-server setup`` on a real pseudo-terminal (its controlling terminal: Ctrl-C is a SIGINT)."""

    def __init__(self, *args: str) -> None:
        self.master, slave = os.openpty()

        def controlling_terminal() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "setup", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=_env(),
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


async def test_interactive_setup_on_a_terminal(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    async with _model() as model:
        model.model_list_status = 401
        _tool_round_trip(model)
        with Terminal("--config", str(config)) as terminal:
            await terminal.expect("or type a URL")
            assert b"http://localhost:11434/v1" in terminal.seen and b"LM Studio" in terminal.seen
            terminal.type(model.base_url + "\n")
            await terminal.expect("API key: ")  # the endpoint said 401
            model.model_list_status = None
            terminal.type(KEY + "\n")
            await terminal.expect("Choose 1-2")
            assert b"2) chat  (context window 4096 tokens)" in terminal.seen
            terminal.type("2\n")
            code = await terminal.finish()
    out = terminal.seen.decode(errors="replace")
    assert code == 0, out
    assert "✓ the model calls tools" in out and KEY not in out  # never echoed nor printed
    assert tomllib.loads(config.read_text()) == {"base-url": model.base_url, "api-key": KEY, "model": "chat"}
    assert config.stat().st_mode & 0o777 == 0o600


async def test_ctrl_c_leaves_the_old_file_untouched(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "old"\n')
    config.chmod(0o600)
    before = config.read_bytes()
    async with _model() as model:
        with Terminal("--config", str(config)) as terminal:
            await terminal.expect("or type a URL")
            terminal.type(model.base_url + "\n")
            await terminal.expect("Choose 1-2")
            terminal.type("\x03")  # Ctrl-C: the terminal sends SIGINT
            code = await terminal.finish()
    out = terminal.seen.decode(errors="replace")
    assert code == 130, out
    assert "unchanged" in out and "Traceback" not in out
    assert config.read_bytes() == before
    assert [p.name async for p in anyio.Path(tmp_path).iterdir()] == ["config.toml"]  # no temporary file left


@pytest.mark.parametrize("text", ['quote " and \\ backslash', "line\nbreak\ttab", "\x7f\x00\x1f del nul", "ünï 😀"])
def test_what_setup_writes_reads_back(text: str) -> None:
    from acp_server.cli._setup import toml_document

    document = {"model": text, "models": [text, "b"], "max-turn-requests": 3, "profiles": {"x y": {"model": text}}}
    assert tomllib.loads(toml_document(document)) == document
