"""The manual's permission round trip with curl (docs/daemon.md), run by bash as printed — against a daemon in this
process (a token, the loopback model scripted to write the file) instead of the two lines that start a real one."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.docs_pages import page

from ._support import running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOKEN = "readme-token-0123456789"
STARTS_THE_DAEMON = ("export ACP_SERVER_TOKEN=", "acp-server serve ")


def _example() -> str:
    blocks = [b for b in re.findall(r"```sh\n(.*?)\n```", page("daemon.md"), re.S) if "/permission/" in b]
    assert len(blocks) == 1, "the daemon page lost its permission round trip"
    return blocks[0]


def test_the_example_starts_a_daemon_with_a_token_and_only_there() -> None:
    lines = _example().splitlines()
    assert [line.startswith(STARTS_THE_DAEMON) for line in lines[:2]] == [True, True]
    assert not any("acp-server" in line for line in lines[2:])
    assert "/health" in lines[3] and "--retry-connrefused" in lines[3]


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None, reason="needs bash and curl")
async def test_the_readme_permission_round_trip_runs_as_printed(tmp_path: Path) -> None:
    script = "\n".join(line for line in _example().splitlines() if not line.startswith(STARTS_THE_DAEMON))
    project = tmp_path / "project"
    project.mkdir()
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "NOTES.md", "content": "hello\n"}, id="w1"),)),
            Answer(text="NOTES.md now says hello."),
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["ACP_SERVER_PORT"] = served.url.rsplit(":", 1)[1]
        env["ACP_SERVER_TOKEN"] = TOKEN
        out, err = tmp_path / "stdout", tmp_path / "stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            # Its own process group: the event follower it leaves in the background is ended with it.
            process = await anyio.open_process(
                ["bash", "-c", script], cwd=project, env=env, stdout=stdout, stderr=stderr, start_new_session=True
            )
            try:
                with anyio.fail_after(30):
                    status = await process.wait()
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.aclose()
    lines = out.read_text().splitlines()
    assert status == 0, err.read_text()
    assert re.fullmatch(r'\{"status":"ok","instance":"[^"]+-\d+-[0-9a-f]{8}"\}', lines[0]), lines[0]
    assert '"promptId"' in lines[1]  # the 202
    assert lines[-2:] == ["204", "hello"]  # the answer, then the file the allowed call wrote
    assert "Write NOTES.md" in err.read_text()  # the title the example shows
    assert (project / "NOTES.md").read_text() == "hello\n"
