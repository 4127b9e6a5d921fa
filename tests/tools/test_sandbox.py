"""Commands in the kernel sandbox, with the real mechanisms (bubblewrap and Landlock): no write outside the roots
(``..``, symbolic links, ``/proc/self/root`` included), the credential stores and the agent's config hidden
(bubblewrap), no connection to the host's loopback, nothing left running, a private ``TMPDIR`` removed after, and a
small project's tests run. Each test skips, saying why, where its mechanism does not work here."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from acp_server.modes import SANDBOX_MODE, needs_asking
from acp_server.tools import SandboxPolicy, ToolCallError, configure_sandbox, sandbox_support
from acp_server.tools._command import run_local
from acp_server.tools._workspace import Workspace
from acp_server.tools.builtin.run_command import RunCommand, RunCommandArgs

pytestmark = pytest.mark.anyio

MECHANISMS = ("bubblewrap", "landlock")


@pytest.fixture(params=MECHANISMS)
def mechanism(request: pytest.FixtureRequest) -> Iterator[str]:
    """The mechanism under test, set as the process's policy (reset after); skips where it does not work."""
    name = str(request.param)
    configure_sandbox(SandboxPolicy(mechanism=name))  # type: ignore[arg-type]
    try:
        support = sandbox_support()
        if support.mechanism != name:
            pytest.skip(f"{name} does not work here: {support.detail}")
        yield name
    finally:
        configure_sandbox(SandboxPolicy())


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with a planted SSH key and the agent's config file holding a key."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".config" / "acp-server").mkdir(parents=True)
    (home / ".config" / "acp-server" / "config.toml").write_text('api_key = "sk-SECRET-IN-CONFIG"\n')
    (home / ".netrc").write_text("machine example.com password NETRC-SECRET\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


async def sandboxed(root: Path, command: str) -> str:
    result = await run_local(command, Workspace(str(root), sandboxed=True), 60_000, sandboxed=True)
    return result.output


async def test_writes_inside_the_roots_only(mechanism: str, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    output = await sandboxed(
        root,
        f"echo in > inside.txt; echo a > {outside}/a; echo b > ../outside/b; echo c > link/c; "
        f"echo d > /proc/self/root{outside}/d; echo e > {tmp_path}/e; cat inside.txt",
    )
    assert (root / "inside.txt").read_text() == "in\n"
    assert list(outside.iterdir()) == [] and not (tmp_path / "e").exists(), output
    assert output.startswith("Exit code: 0")


async def test_the_secrets_are_hidden(mechanism: str, root: Path, home: Path) -> None:
    if mechanism == "landlock":
        pytest.skip("Landlock cannot hide a file under a readable parent (documented)")
    output = await sandboxed(root, "cat ~/.ssh/id_ed25519 ~/.config/acp-server/config.toml ~/.netrc; ls -A ~/.ssh")
    assert "PRIVATE-KEY-MATERIAL" not in output
    assert "sk-SECRET-IN-CONFIG" not in output and "NETRC-SECRET" not in output
    assert "No such file" in output
    assert (home / ".ssh" / "id_ed25519").read_text() == "PRIVATE-KEY-MATERIAL\n"  # untouched outside


async def test_no_connection_to_the_hosts_loopback(mechanism: str, root: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('CONNECTED')"
        output = await sandboxed(root, f'{sys.executable} -c "{script}"')
    assert "CONNECTED" not in output
    assert "Error" in output  # refused (bubblewrap: its own loopback) or denied (Landlock)


def _running(marker: str) -> list[int]:
    """The host's processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def test_nothing_started_survives_the_command(mechanism: str, root: Path) -> None:
    marker = f"31.4159{len(mechanism)}"
    output = await sandboxed(root, f"setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & echo started")
    assert "started" in output
    assert _running(f"sleep\0{marker}") == []


async def test_a_private_tmpdir_removed_after(mechanism: str, root: Path) -> None:
    output = await sandboxed(root, 'touch "$TMPDIR/scratch" && echo "TMP=$TMPDIR"')
    tmpdir = output.split("TMP=", 1)[1].strip()
    assert tmpdir and not await anyio.Path(tmpdir).exists()


async def test_a_project_builds_and_tests_inside(mechanism: str, root: Path) -> None:
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    output = await sandboxed(root, f"{sys.executable} -m pytest -q -p no:randomly test_calc.py")
    assert output.startswith("Exit code: 0"), output
    assert "1 passed" in output


async def test_outside_the_sandbox_is_a_call_that_asks_keyed_by_its_prefix(root: Path) -> None:
    workspace = Workspace(str(root), sandboxed=True)
    tool = RunCommand()
    inside = await tool.prepare(RunCommandArgs(command="npm install left-pad"), workspace, None)
    assert inside.sandboxed and inside.rule is None and inside.title.endswith("in the sandbox")
    args = RunCommandArgs(command="npm install left-pad", outside_sandbox=True, reason="it needs the registry")
    outside = await tool.prepare(args, workspace, None)
    assert not outside.sandboxed and outside.kind == "execute"
    assert "it needs the registry" in outside.title
    assert outside.rule == "run_command outside the sandbox: npm install"
    assert needs_asking(SANDBOX_MODE, outside.kind, outside.sandboxed)
    assert not needs_asking(SANDBOX_MODE, inside.kind, inside.sandboxed)
    with pytest.raises(ToolCallError, match="needs a reason"):
        await tool.prepare(RunCommandArgs(command="curl x", outside_sandbox=True), workspace, None)
    plain = await tool.prepare(RunCommandArgs(command="ls"), Workspace(str(root)), None)  # another mode
    assert not plain.sandboxed and plain.rule is None


@pytest.mark.e2e  # starts acp_server --help as a process
def test_help_names_the_mechanism() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "sandbox mode: " in done.stdout and sandbox_support().detail.split(" ")[0] in done.stdout


async def test_the_configured_paths_are_hidden_too(mechanism: str, root: Path, tmp_path: Path) -> None:
    if mechanism == "landlock":
        pytest.skip("Landlock cannot hide a file under a readable parent (documented)")
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "token").write_text("VAULT-TOKEN\n")
    configure_sandbox(SandboxPolicy(mechanism="bubblewrap", hide=(str(vault),)))
    output = await sandboxed(root, f"cat {vault}/token")
    assert "VAULT-TOKEN" not in output and "No such file" in output


async def test_the_network_when_the_setting_allows_it(mechanism: str, root: Path) -> None:
    configure_sandbox(SandboxPolicy(mechanism=mechanism, network=True))  # type: ignore[arg-type]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('CONNECTED')"
        output = await sandboxed(root, f'{sys.executable} -c "{script}"')
    assert "CONNECTED" in output, output


async def test_a_root_inside_a_hidden_directory_stays_usable(mechanism: str, home: Path) -> None:
    root = home / ".config" / "acp-server" / "project"
    root.mkdir()
    output = await sandboxed(root, "echo ok > made.txt && cat made.txt; cat ../config.toml")
    assert (root / "made.txt").read_text() == "ok\n"
    if mechanism == "bubblewrap":
        assert "sk-SECRET-IN-CONFIG" not in output  # its hidden neighbours stay hidden
