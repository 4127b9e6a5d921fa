"""The system prompt of a turn: how to work (:data:`DEFAULT_SYSTEM_PROMPT`, or the operator's own text), the
environment the model works in, and the project's instructions, built afresh for each prompt.

Never blocks the prompt for long: the git state is asked of ``git status`` for at most :data:`GIT_TIMEOUT_S`
(past that it reads "unknown" and the process group is killed); the instruction files are read in a worker thread.
``git`` runs without the agent's secrets, without optional locks (the user's own git commands never wait on it) and
with ``core.fsmonitor`` off (a repository's configuration cannot make it run a program).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import signal
import subprocess
from collections.abc import Sequence
from datetime import datetime

import anyio
import anyio.to_thread
from anyio.abc import Process

from ..tools import SECRET_ENV, ToolSet
from ._instructions import project_instructions, repository_root

__all__ = ["DEFAULT_SYSTEM_PROMPT", "GIT_TIMEOUT_S", "build_system_prompt", "environment_block", "git_state"]

logger = logging.getLogger("acp_server.turn")

GIT_TIMEOUT_S = 0.2
"""How long a prompt waits for ``git status`` at most."""

_GIT_OUTPUT_BYTES = 4096  # the branch line and whether another line follows: the rest of the output is not read

DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent in the user's project. Paths are relative to the working directory below, or absolute \
inside it.

- Explore first (grep, glob, read_file); follow the project's conventions.
- Edit only text you have just read (edit_file; write_file for new files); never guess what a file holds.
- After a change, run the tests or checks and fix what you broke. Commands get no input: avoid pagers and prompts.
- For multi-step work, keep a plan with update_plan.
- Do what was asked, no more; ask first when the request is ambiguous or a step is hard to undo.
- A declined call: do not repeat it unchanged, say what you wanted and why. A failed one: read its error and adjust.
- Keep answers short: what you found or changed, naming files by path. Use Markdown."""
"""How the model is asked to work; ``--system-prompt-file`` replaces it (the environment and the project
instructions still follow)."""


@functools.cache
def _os_name() -> str:
    system, release = platform.system() or "unknown", platform.release()
    if system == "Linux":
        with contextlib.suppress(OSError):
            pretty = platform.freedesktop_os_release().get("PRETTY_NAME")
            if pretty:
                return f"Linux {release} ({pretty})"
    if system == "Darwin":
        return f"macOS {platform.mac_ver()[0] or release}"
    return f"{system} {release}".strip()


def _git_env() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in SECRET_ENV}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _describe_status(output: bytes) -> str:
    """``git status --porcelain --branch`` output (its first bytes) in words: the branch, and whether the tree has
    changes."""
    lines = output.decode("utf-8", "replace").split("\n")
    head = lines[0].removeprefix("## ")
    if head.startswith("No commits yet on "):
        branch = f"branch {head.removeprefix('No commits yet on ')} (no commits yet)"
    elif head.startswith("HEAD (no branch)"):
        branch = "detached HEAD"
    else:
        branch = f"branch {head.split('...')[0].split(' ')[0]}"
    dirty = any(line.strip() for line in lines[1:])
    return f"{branch}, {'uncommitted changes' if dirty else 'clean working tree'}"


async def git_state(cwd: str, timeout_s: float = GIT_TIMEOUT_S) -> str:
    """The git state of ``cwd`` in a few words: "not a git repository", the branch and whether the work tree is
    dirty, or why that is unknown (git missing, failing, or slower than ``timeout_s``: then its process group is
    killed). Never raises but for cancellation."""
    if not os.path.isabs(cwd):
        return "unknown (the session has no working directory)"
    if repository_root(cwd) is None:
        return "not a git repository"
    command = ["git", "-c", "core.fsmonitor=false", "status", "--porcelain=v1", "--branch"]
    try:
        with anyio.CancelScope(shield=True):  # a cancel must not leave a started process without its handle
            process = await anyio.open_process(
                command,
                cwd=cwd,
                env=_git_env(),
                stdin=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
    except OSError as exc:
        logger.debug("git status could not start: %s", exc)
        return "a git repository (its state is unknown: git could not be run)"
    output = b""
    finished = False
    try:
        assert process.stdout is not None
        with anyio.move_on_after(timeout_s):
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while len(output) < _GIT_OUTPUT_BYTES:
                    output += await process.stdout.receive(_GIT_OUTPUT_BYTES - len(output))
            code = await process.wait() if len(output) < _GIT_OUTPUT_BYTES else 0
            finished = True
    finally:
        if process.returncode is None:  # too slow, too much to say, or cancelled: its whole group goes
            _kill_group(process)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await process.aclose()
    if not finished:
        return "a git repository (its state is unknown: git status took too long)"
    if code != 0 or not output:
        return "a git repository (its state is unknown: git status failed)"
    return _describe_status(output)


async def environment_block(cwd: str, git_timeout_s: float = GIT_TIMEOUT_S, additional: Sequence[str] = ()) -> str:
    """The environment the model works in: OS, shell, today's date, the working directory and its git state, and
    the session's additional directories (further roots the tools may use; their git state is not read)."""
    shell = os.path.basename(os.environ.get("SHELL", "")) or "sh"
    today = datetime.now().astimezone()
    git = await git_state(cwd, git_timeout_s)
    return "\n".join(
        [
            "# Environment",
            f"- Operating system: {_os_name()}",
            f"- User's shell: {shell} (run_command runs each command line with /bin/sh -c, or in the editor's "
            "terminal)",
            f"- Today's date: {today:%Y-%m-%d} ({today:%A})",
            f"- Working directory: {cwd}",
            f"- Git: {git}",
            *_additional_lines(additional),
        ]
    )


def _additional_lines(additional: Sequence[str]) -> list[str]:
    if not additional:
        return []
    return [
        "- Additional directories (the tools may read and, with permission, write there too; give paths in them as "
        "absolute paths; relative paths, relative glob patterns and grep without a path stay in the working "
        "directory; commands start in the working directory):",
        *(f"  - {directory}" for directory in additional),
    ]


async def build_system_prompt(
    base: str,
    cwd: str,
    instructions: bool = True,
    *,
    git_timeout_s: float = GIT_TIMEOUT_S,
    additional: Sequence[str] = (),
    tools: ToolSet | None = None,
) -> str:
    """``base`` (how to work), then the environment (naming the ``additional`` directories), then
    (``instructions``) the project instructions — read from the cwd's repository only, never from an additional
    directory — then what the ``tools`` add (the skills' list)."""
    parts = [base.strip(), await environment_block(cwd, git_timeout_s, additional)]
    if instructions and os.path.isabs(cwd):  # never the server's own directory
        section = await anyio.to_thread.run_sync(project_instructions, cwd, abandon_on_cancel=True)
        if section:
            parts.append(section)
    if tools is not None and os.path.isabs(cwd):
        parts.append(await anyio.to_thread.run_sync(tools.instructions, cwd, abandon_on_cancel=True))
    return "\n\n".join(part for part in parts if part)
