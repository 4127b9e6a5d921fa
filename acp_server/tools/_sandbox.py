"""The kernel sandbox that ``sandbox`` mode runs commands in: which mechanism this host has, and the command line
that confines one command.

Mechanisms, chosen once per process (:func:`support`, reported by ``--help`` and the log):

- **bubblewrap** (``bwrap`` installed and able to make user/mount/PID/network namespaces): the whole file system
  read-only, the session's roots and a private ``TMPDIR`` writable; the hidden paths (:data:`CREDENTIAL_STORES`,
  the agent's config and state directories, the policy's extra ones) covered by an empty directory or ``/dev/null``;
  a new network namespace (loopback only: a test server the command starts itself still works, the host's
  services do not); a PID namespace whose end kills everything the command started, ``setsid`` daemons included.
- **Landlock** (:mod:`._landlock`, kernel ABI 1+): writes confined to the same directories; TCP connect/bind
  denied (ABI 4+); a subreaper kills every descendant at the end. It *cannot* hide a file under a readable parent
  (``~/.ssh`` stays readable), nor block UDP or Unix sockets: said in the log and the docs.
- neither (or macOS, left for later): the mode is not offered; the reason is logged once.

Invariant: a :class:`SandboxPolicy` is the one description of what a command may touch; :func:`wrap` turns it into
an argv whose effect never widens it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from . import _landlock

__all__ = [
    "CREDENTIAL_STORES",
    "Confinement",
    "SandboxPolicy",
    "SandboxSupport",
    "configure",
    "policy",
    "support",
    "wrap",
]

CREDENTIAL_STORES: tuple[str, ...] = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/git/credentials",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.config/acp-server",
    "~/.local/state/acp-server",
)
"""Hidden from every sandboxed command (``~`` is ``$HOME`` when the command starts): the user's credential stores
and the agent's own config and state. ``--sandbox-hide`` adds more; the state directory in use is added too."""

Mechanism = Literal["bubblewrap", "landlock"]


@dataclass(frozen=True, slots=True)
class SandboxSupport:
    """What this host can do: ``mechanism`` (None: the mode is not offered) and ``detail`` (what it confines, or why
    there is none)."""

    mechanism: Mechanism | None
    detail: str


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed command may do beyond its roots: ``hide`` extra paths, ``network`` allowed, ``enabled`` (the
    mode offered at all), ``state_dir`` the agent's state directory (hidden too), ``mechanism`` the one to use
    (None: bubblewrap where it works, else Landlock)."""

    hide: tuple[str, ...] = ()
    network: bool = False
    enabled: bool = True
    state_dir: str | None = None
    mechanism: Mechanism | None = None


_POLICY: list[SandboxPolicy] = [SandboxPolicy()]


def configure(new: SandboxPolicy) -> None:
    """Set the process's policy (the config layer, at start)."""
    _POLICY[0] = new


def policy() -> SandboxPolicy:
    """The process's policy."""
    return _POLICY[0]


@functools.cache
def _bwrap_works(bwrap: str) -> str | None:
    """None when ``bwrap`` can make the namespaces a command needs here; else why not."""
    try:
        done = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "/bin/true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    if done.returncode != 0:
        return "bwrap cannot create namespaces here: " + done.stderr.decode("utf-8", "replace").strip()[:200]
    return None


@functools.cache
def _probe(prefer: str | None = None) -> SandboxSupport:
    if sys.platform == "darwin":
        return SandboxSupport(None, "macOS (Seatbelt) is not supported yet")
    if not sys.platform.startswith("linux"):
        return SandboxSupport(None, f"no sandbox mechanism on {sys.platform}")
    reasons = []
    bwrap = shutil.which("bwrap")
    if prefer != "landlock":
        if bwrap is None:
            reasons.append("bubblewrap (bwrap) is not installed")
        else:
            problem = _bwrap_works(bwrap)
            if problem is None:
                return SandboxSupport(
                    "bubblewrap", f"bubblewrap ({bwrap}): read-only system, hidden secrets, no network, own PIDs"
                )
            reasons.append(problem)
    abi = _landlock.abi()
    if abi > 0:
        net = "TCP denied" if abi >= 4 else "network NOT confined (ABI < 4)"
        return SandboxSupport(
            "landlock",
            f"Landlock ABI {abi}: writes confined to the roots, {net}; it cannot hide secrets under a readable "
            "parent (~/.ssh stays readable) nor block UDP or Unix sockets",
        )
    reasons.append("Landlock is not available in this kernel")
    return SandboxSupport(None, "; ".join(reasons))


def support() -> SandboxSupport:
    """The mechanism of this process (probed once; none when the policy turned the mode off; the policy's
    ``mechanism`` only: ``landlock`` skips bubblewrap)."""
    if not policy().enabled:
        return SandboxSupport(None, "turned off (--no-sandbox)")
    found = _probe(policy().mechanism)
    wanted = policy().mechanism
    if wanted is not None and found.mechanism != wanted:
        return SandboxSupport(None, f"{wanted} was asked for and does not work here: {found.detail}")
    return found


def _hidden(home: str | None) -> list[str]:
    paths: list[str] = []
    state = policy().state_dir
    for entry in (*CREDENTIAL_STORES, *policy().hide, *((state,) if state else ())):
        if entry.startswith("~"):
            if not home:
                continue
            entry = home + entry[1:]
        path = os.path.realpath(entry)
        if os.path.lexists(path) and path not in paths:
            paths.append(path)
    return paths


class Confinement:
    """One sandboxed command's confinement: its private ``TMPDIR`` (made on entry, removed on exit), its
    environment and its argv (:func:`wrap`)."""

    def __init__(self, cwd: str, roots: Sequence[str]) -> None:
        self.cwd = cwd
        self.roots = tuple(roots)
        self.tmpdir = ""
        self._env: dict[str, str] = {}

    def __enter__(self) -> Confinement:
        self.tmpdir = tempfile.mkdtemp(prefix="acp-sandbox-")
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The command's environment: ``base`` (scrubbed by the caller) with ``TMPDIR``."""
        self._env = {**base, "TMPDIR": self.tmpdir}
        return self._env

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` confined (:func:`wrap`)."""
        return wrap(argv, self.roots, self.tmpdir, {**self._env, "PWD": self.cwd})


def wrap(argv: Sequence[str], roots: Sequence[str], tmpdir: str, env: dict[str, str]) -> list[str]:
    """``argv`` confined: writable ``roots`` (real paths) and ``tmpdir``, the rest read-only, the secrets hidden
    (bubblewrap), no network unless allowed, nothing surviving its end. ``env`` gets ``TMPDIR``."""
    mechanism = support().mechanism
    env["TMPDIR"] = tmpdir
    network = policy().network
    if mechanism == "bubblewrap":
        bwrap = shutil.which("bwrap") or "bwrap"
        args = [bwrap, "--die-with-parent", "--unshare-user-try", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
        args += ["--unshare-cgroup-try"]
        if not network:
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for root in (*roots, tmpdir):
            args += ["--bind", root, root]
        for path in _hidden(env.get("HOME")):
            if os.path.isdir(path):
                args += ["--tmpfs", path]
                for inner in (*roots, tmpdir):  # a root the session was given inside a hidden directory stays
                    if inner == path or inner.startswith(path.rstrip(os.sep) + os.sep):
                        args += ["--bind", inner, inner]
                args += ["--remount-ro", path]
            else:
                args += ["--ro-bind", "/dev/null", path]
        return [*args, "--chdir", env.get("PWD", roots[0]), "--", *argv]
    if mechanism == "landlock":
        python = sys.executable or "python3"
        flags = [] if network else ["--no-network"]
        writable = [arg for root in (*roots, tmpdir) for arg in ("--write", root)]
        return [python, "-I", "-S", _landlock.__file__, *flags, *writable, "--", *argv]
    raise RuntimeError("no sandbox mechanism on this host")
