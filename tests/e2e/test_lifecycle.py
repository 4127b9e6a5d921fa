"""Process lifecycle over real pipes: EOF and SIGTERM answer in-flight prompts and exit 0; usage errors exit 2;
no model configured still starts (a session asks for setup); ``acp-server ask`` works as a shell command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from acp_server.provider.offline import LoopbackModel, SlowDrip

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio

PROMPT = [{"type": "text", "text": "tell me everything"}]


@pytest.mark.parametrize("how", ["eof", "sigterm"])
async def test_shutdown_answers_the_running_prompt_and_exits_zero(how: str) -> None:
    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=0.02, text="word " * 5000))
        async with spawn_agent("--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            prompt_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
            first = await agent.receive()
            assert first["method"] == "session/update"
            if how == "eof":
                await agent.close_stdin()
            else:
                agent.process.send_signal(signal.SIGTERM)
            response, _ = await agent.until_response(prompt_id)
            assert response["result"] == {"stopReason": "cancelled"}
            assert await agent.process.wait() == 0
            await model.wait_for_disconnects(1)


async def test_without_a_model_it_starts_and_a_session_says_how_to_configure() -> None:
    async with spawn_agent() as agent:
        init = await agent.initialize()
        assert init["result"]["protocolVersion"] == 1
        reply = await agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        error = reply["error"]
        assert error["code"] == -32000
        assert error["data"]["errorKind"] == "auth_required"
        assert "setup" in error["message"]
        assert "--base-url" in error["message"] and "--offline" in error["message"]


async def test_protocol_version_answer_is_our_latest() -> None:
    async with spawn_agent() as agent:
        for asked in (0, 1, 2, 999):
            reply = await agent.request("initialize", {"protocolVersion": asked, "clientCapabilities": {}})
            assert reply["result"]["protocolVersion"] == 1


def _run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--max-pending-prompts-per-session", "-1"], {}, "--max-pending-prompts-per-session"),
        (["--max-pending-prompts-per-session", "2.5"], {}, "--max-pending-prompts-per-session"),
        (["--max-pending-prompts-per-session", "nan"], {}, "--max-pending-prompts-per-session"),
        ([], {"ACP_SERVER_MAX_PENDING_PROMPTS_PER_SESSION": "many"}, "ACP_SERVER_MAX_PENDING_PROMPTS_PER_SESSION"),
        (["--stream-idle-timeout-ms", "soon"], {}, "--stream-idle-timeout-ms"),
        ([], {"ACP_SERVER_STREAM_IDLE_TIMEOUT_MS": "1e3"}, "ACP_SERVER_STREAM_IDLE_TIMEOUT_MS"),
        (["--prompt-deadline-ms", "0"], {}, "--prompt-deadline-ms"),
        (["--max-message-bytes", "0"], {}, "--max-message-bytes"),
        (["--log-level", "LOUD"], {}, "--log-level"),
        (["--log-file", "/nonexistent/dir/x.log"], {}, "--log-file"),
        ([], {"ACP_SERVER_LOG_FILE": "/nonexistent/dir/x.log"}, "ACP_SERVER_LOG_FILE"),
        (["serve", "--log-file", "/nonexistent/dir/x.log"], {}, "--log-file"),
        (["ask", "--log-file", "/nonexistent/dir/x.log", "hi"], {}, "--log-file"),
    ],
)
def test_invalid_settings_are_usage_errors(args: list[str], env: dict[str, str], named: str) -> None:
    result = _run(
        *args, env=env, stdin='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    )
    assert result.returncode == 2
    assert named in result.stderr
    assert result.stdout == ""  # nothing was started: no reply


def test_api_key_is_never_echoed_in_a_usage_error() -> None:
    result = _run("--max-pending-prompts-per-session", "x", env={"OPENAI_API_KEY": "sk-very-secret-1234"})
    assert result.returncode == 2 and "sk-very-secret-1234" not in result.stderr


def test_ask_offline_prints_the_answer() -> None:
    result = _run("ask", "--offline", "what is up")
    assert result.returncode == 0, result.stderr
    assert "what is up" in result.stdout
    assert result.stdout.count("\n") >= 1


def test_ask_reads_the_prompt_from_stdin() -> None:
    result = _run("--offline", "ask", "-", stdin="piped question")
    assert result.returncode == 0, result.stderr
    assert "piped question" in result.stdout


def test_ask_fails_with_the_error_message() -> None:
    result = _run("ask", "hello")
    assert result.returncode == 1
    assert "no model endpoint is configured" in result.stderr and "acp-server setup" in result.stderr


def test_log_level_help_lists_what_it_accepts() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "--log-level LEVEL" in result.stdout
    assert "DEBUG, INFO, WARNING, ERROR, CRITICAL" in " ".join(result.stdout.split())
