"""The manual's ``acp-server serve`` shell example, extracted from docs/daemon.md and run by bash exactly as printed
(against ``--offline``, on a free port through ``ACP_SERVER_PORT``, which the example honours)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import page


def _example() -> str:
    section = page("daemon.md").split("\n## Try it\n", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block is not None, "the daemon page lost its shell example"
    return block.group(1)


def _free_port() -> int:
    """A free port *below* the kernel's ephemeral range: the daemon binds it only later, and a port from that range
    (what binding port 0 returns) can meanwhile be taken by any other socket — another test's server, or the source
    port of an outgoing connection."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            ephemeral_low = int(ports.read().split()[0])
    except OSError:  # not Linux: the racy way
        ephemeral_low = 0
    if ephemeral_low <= 10_000:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10_000, ephemeral_low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below the ephemeral range")


def test_the_example_waits_for_health_before_its_first_request() -> None:
    lines = [line for line in _example().splitlines() if "curl" in line]
    assert "/health" in lines[0] and "--retry-connrefused" in lines[0]


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None, reason="needs bash and curl")
def test_the_readme_daemon_example_runs_as_printed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this venv's acp-server
    env["ACP_SERVER_PORT"] = str(_free_port())
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    # Its own process group: the daemon and the event follower it leaves in the background are ended with it.
    shell = subprocess.Popen(
        ["bash", "-c", _example()],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        script_status = shell.wait(timeout=45)  # the last command (the prompt with ?wait=true) has answered
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)  # the daemon shuts down, ending the event stream too
    try:
        out, err = shell.communicate(timeout=30)  # EOF once every process of the group has exited
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    stdout, stderr = out.decode(), err.decode()
    assert script_status == 0, stderr
    health = re.compile(r'\{"status":"ok","instance":"[^"]+-\d+-[0-9a-f]{8}"\}')
    assert any(health.fullmatch(line) for line in stdout.splitlines())  # the health wait answered before the rest
    # the ?wait=true reply; the event follower writes to the same stdout meanwhile, so it is found, not split by line
    replies = [json.loads(reply) for reply in re.findall(r'\{"promptId":"[0-9a-f]+","stopReason":"[a-z_]+"\}', stdout)]
    assert [r["stopReason"] for r in replies] == ["end_turn"]  # the ?wait=true reply (events are "data: ...")
    assert "/session//" not in stderr and "sessionId" not in stderr
    assert f"listening on http://127.0.0.1:{env['ACP_SERVER_PORT']}" in stderr
