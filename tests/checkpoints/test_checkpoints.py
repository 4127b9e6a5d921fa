"""The checkpoints package on real files: the disk cap (oldest prompts first, never the running one), a fork's own
copy, the removal with the session, and a command snapshot's bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_server.checkpoints import CheckpointRoot, SessionCheckpoints
from acp_server.checkpoints import _scan as scan_module
from acp_server.tools import Workspace

pytestmark = pytest.mark.anyio


async def _prompt_writes(checkpoints: SessionCheckpoints, workspace: Workspace, seq: int, name: str) -> None:
    """Prompt ``seq`` rewrites ``name`` (its prior content is checkpointed first)."""
    checkpoints.begin(seq)
    target = workspace.resolve(name)
    await checkpoints.before_change(target)
    Path(target.real).write_bytes(os.urandom(40_000))  # noqa: ASYNC240 - a small test write
    await checkpoints.after_change(target)
    checkpoints.end()


async def test_the_disk_cap_holds_dropping_the_oldest_prompts_first(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for i in range(6):
        (project / f"f{i}.bin").write_bytes(os.urandom(40_000))
    checkpoints = CheckpointRoot(str(tmp_path / "checkpoints"), cap=100_000).session("s1")
    workspace = Workspace(str(project))
    for i in range(6):
        await _prompt_writes(checkpoints, workspace, 2 * i + 1, f"f{i}.bin")
        assert checkpoints.disk_usage() <= 100_000
    kept = checkpoints.prompts()
    assert kept == [9, 11]  # the two newest fit in 100 kB; the older ones were dropped, oldest first
    manifest = checkpoints.manifest(11)
    assert manifest is not None and list(manifest.files) == [str(project / "f5.bin")]


async def test_a_fork_gets_its_own_copy_and_a_delete_removes_only_its_own(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("A\n")
    root = CheckpointRoot(str(tmp_path / "checkpoints"))
    parent = root.session("parent")
    await _prompt_writes(parent, Workspace(str(project)), 1, "a.txt")
    await root.copy("parent", "child")
    child = root.session("child")
    assert child.prompts() == [1] and child.manifest(1) == parent.manifest(1)
    await _prompt_writes(child, Workspace(str(project)), 3, "a.txt")
    assert parent.prompts() == [1]  # the child's prompt is the child's
    await root.remove("child")
    assert not os.path.exists(child.directory) and parent.prompts() == [1]  # noqa: ASYNC240


async def test_a_command_snapshot_is_skipped_past_its_bound_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for i in range(5):
        (project / f"f{i}.txt").write_text(f"{i}\n")
    monkeypatch.setattr(scan_module, "MAX_SCAN_FILES", 3)
    checkpoints = CheckpointRoot(str(tmp_path / "checkpoints")).session("s1")
    checkpoints.begin(1)
    snapshot = await checkpoints.before_command(Workspace(str(project)))
    note = await checkpoints.after_command(snapshot)
    assert note.startswith("(No checkpoint of this command: the project has more than 3 files")
    assert "cannot be undone with /rewind" in note
