"""As root, a local command runs without ``CAP_SYS_PTRACE`` (so it cannot open the non-dumpable agent's ``mem`` or
``fd/*``): through util-linux's ``setpriv`` when installed, else the standard-library wrapper; both checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.tools import _command, _unprivileged

from ._support import call

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or os.geteuid() != 0, reason="capabilities are dropped as root on Linux"
    ),
]

_CAP_SYS_PTRACE = 1 << 19
_SHOW = "grep -E '^Cap(Bnd|Eff):' /proc/self/status"


def _masks(output: str) -> dict[str, int]:
    return {line.split(":")[0]: int(line.split()[1], 16) for line in output.splitlines() if line.startswith("Cap")}


@pytest.fixture(autouse=True)
def _agent_has_it() -> None:
    with open("/proc/self/status") as status:
        if not _masks(status.read())["CapEff"] & _CAP_SYS_PTRACE:
            pytest.skip("this root has no CAP_SYS_PTRACE to drop (a container's default set)")


async def test_a_command_run_as_root_has_no_cap_sys_ptrace(tmp_path: Path) -> None:
    result = await call(tmp_path, "run_command", command=_SHOW)
    masks = _masks(result.output)
    assert set(masks) == {"CapBnd", "CapEff"}
    assert not masks["CapBnd"] & _CAP_SYS_PTRACE and not masks["CapEff"] & _CAP_SYS_PTRACE


async def test_without_setpriv_the_python_wrapper_drops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_command.shutil, "which", lambda *args, **kwargs: None)
    _command._drop_ptrace_prefix.cache_clear()
    try:
        assert _command._shell("x")[:4] == [sys.executable, "-I", "-S", _unprivileged.__file__]
        result = await call(tmp_path, "run_command", command=_SHOW)
    finally:
        monkeypatch.undo()
        _command._drop_ptrace_prefix.cache_clear()
    masks = _masks(result.output)
    assert masks and not masks["CapBnd"] & _CAP_SYS_PTRACE and not masks["CapEff"] & _CAP_SYS_PTRACE


def test_the_wrapper_says_why_a_program_cannot_run() -> None:
    wrapper = [sys.executable, "-I", "-S", _unprivileged.__file__, "/nonexistent/sh"]
    done = subprocess.run(wrapper, capture_output=True, text=True, timeout=30)
    assert done.returncode == 127
    assert done.stderr == "/nonexistent/sh: cannot run it: No such file or directory\n"
