"""The watchdog of a local command (``acp_server.tools._command_watchdog``): it kills the command's group when the
agent's end of its pipe closes, ignores the signals a terminal or a timeout sends, and is stopped and reaped after
each call."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from acp_server.tools import _command, _command_watchdog

from ._support import call

pytestmark = pytest.mark.anyio


def _watchdogs() -> list[int]:
    """The pids of running watchdogs whose parent is this process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if _command_watchdog.__file__.encode() in cmdline and int(stat.rpartition(")")[2].split()[1]) == os.getpid():
            found.append(int(entry))
    return found


async def test_the_watchdog_is_stopped_and_reaped_after_each_call(tmp_path: Path) -> None:
    for _ in range(3):
        result = await call(tmp_path, "run_command", command="echo ok")
        assert result.output == "Exit code: 0\nok\n"
    assert _watchdogs() == []


def _ends(pid: int) -> bool:
    """Whether a process that is not our child ends (its pidfd turns readable) within 10 s."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([pidfd], [], [], 10)[0])
    finally:
        os.close(pidfd)


def _wait_ignoring(pid: int, number: int) -> None:
    """Until the process ignores signal ``number`` (its ``SigIgn`` mask in /proc; bounded)."""
    for _ in range(1000):
        mask = int(Path(f"/proc/{pid}/status").read_text().split("SigIgn:")[1].split()[0], 16)
        if mask & (1 << (number - 1)):
            return
        time.sleep(0.01)
    raise AssertionError("the watchdog never got ready")


def test_closing_the_pipe_kills_the_whole_group_even_what_ignores_sigterm(tmp_path: Path) -> None:
    group = subprocess.Popen(
        ["/bin/sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert group.stdout is not None
    sleeper = int(group.stdout.readline())
    death_r, death_w = os.pipe()
    watchdog = subprocess.Popen(
        [sys.executable, "-I", "-S", _command_watchdog.__file__, str(group.pid)], stdin=death_r, start_new_session=True
    )
    os.close(death_r)
    try:
        _wait_ignoring(watchdog.pid, signal.SIGTERM)  # its handlers are installed: it is watching
        os.killpg(watchdog.pid, signal.SIGTERM)  # ignored: only the pipe stops the watch
        os.killpg(watchdog.pid, signal.SIGHUP)
        os.close(death_w)  # what the kernel does when the agent dies
        assert watchdog.wait(timeout=10) == 0
        assert group.wait(timeout=10) == -signal.SIGKILL
        assert _ends(sleeper)  # the shell's child, which ignored SIGTERM, too
    finally:
        for process in (group, watchdog):
            process.kill()
            process.wait()
        group.stdout.close()


async def test_a_command_still_runs_when_no_watchdog_can_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "")
    with anyio.fail_after(10):
        result = await call(tmp_path, "run_command", command="echo ok")
    assert result.output == "Exit code: 0\nok\n"


@pytest.mark.parametrize("opened", [True, False], ids=["gate-opened", "agent-died-first"])
def test_the_command_starts_only_once_the_gate_opens(tmp_path: Path, opened: bool) -> None:
    """The agent opens the gate after the watchdog started; if it dies before, the command never runs."""
    marker = tmp_path / "ran"
    go_r, go_w = os.pipe()
    shell = subprocess.Popen(_command._shell(f"echo $0 > {marker}; cat"), stdin=go_r, stdout=subprocess.PIPE)
    os.close(go_r)
    if opened:
        os.write(go_w, b"\n")
    os.close(go_w)  # what the kernel does when the agent dies
    output, _ = shell.communicate(timeout=30)
    if opened:
        assert shell.returncode == 0 and output == b""  # the command's stdin is /dev/null, not the gate
        assert marker.read_text() == "/bin/sh\n"
    else:
        assert shell.returncode == 1 and not marker.exists()
