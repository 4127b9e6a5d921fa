"""A throwaway PostgreSQL cluster for tests: Debian's initdb/pg_ctl in a temp dir, trust auth, a unix socket there.

initdb refuses root, so as root the cluster runs as ``nobody`` (``setpriv``), its directory chowned to it; the
cluster is stopped with ``pg_ctl stop -m immediate`` and its directory removed at the end. :meth:`Cluster.stop` and
:meth:`Cluster.start` stop and start it in between (a routine restart, as an operator's: ``-m fast``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["Cluster", "find_bindir", "throwaway_cluster"]


@dataclass(frozen=True, slots=True)
class Cluster:
    """A running cluster: ``dsn`` connects to its ``postgres`` database as superuser ``postgres``."""

    socket_dir: str
    _ctl: tuple[str, ...] = field(default=(), repr=False)  # pg_ctl -D data, as the cluster's user
    _start: tuple[str, ...] = field(default=(), repr=False)  # its options and log, for start
    _root: str = field(default="", repr=False)  # the cluster's directory (its user's working directory)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}"

    def stop(self) -> None:
        """Stop the server as an operator's restart does (``-m fast``: every backend ended, FATAL 57P01)."""
        subprocess.run([*self._ctl, "-w", "-m", "fast", "stop"], cwd=self._root, **_RUN)  # type: ignore[call-overload]

    def start(self) -> None:
        """Start it again; returns once it accepts connections."""
        subprocess.run([*self._ctl, *self._start, "-w", "start"], cwd=self._root, **_RUN)  # type: ignore[call-overload]


_RUN = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "timeout": 120}


def find_bindir() -> str | None:
    """The newest Debian PostgreSQL bin directory that has initdb and pg_ctl, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]), reverse=True)
    for initdb in found:
        bindir = os.path.dirname(initdb)
        if os.access(os.path.join(bindir, "pg_ctl"), os.X_OK):
            return bindir
    return None


@contextmanager
def throwaway_cluster(bindir: str) -> Iterator[Cluster]:
    """Start a fresh cluster (listening on its unix socket only) and stop it, whatever happens inside."""
    root = tempfile.mkdtemp(prefix="acp-pg-")
    data, sock = os.path.join(root, "data"), os.path.join(root, "sock")
    os.mkdir(sock)
    prefix: list[str] = []
    if os.geteuid() == 0:
        import pwd

        user = pwd.getpwnam("nobody")
        for path in (root, sock):
            os.chown(path, user.pw_uid, user.pw_gid)
        prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
    run = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "timeout": 120, "cwd": root}
    pg_ctl = os.path.join(bindir, "pg_ctl")
    try:
        subprocess.run([*prefix, os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
                        "-E", "UTF8", "--no-sync"], **run)  # type: ignore[call-overload]
        options = f"-c listen_addresses='' -k {sock} -c fsync=off -c max_connections=200"
        start = ("-o", options, "-l", os.path.join(root, "log"))
        subprocess.run([*prefix, pg_ctl, "-D", data, *start, "-w", "start"], **run)  # type: ignore[call-overload]
        try:
            yield Cluster(sock, (*prefix, pg_ctl, "-D", data), start, root)
        finally:  # stopped already (a test's stop that was not followed by a start): pg_ctl says so, exit 3
            subprocess.run([*prefix, pg_ctl, "-D", data, "stop", "-m", "immediate"], **{**run, "check": False})  # type: ignore[call-overload]
    finally:
        shutil.rmtree(root, ignore_errors=True)
