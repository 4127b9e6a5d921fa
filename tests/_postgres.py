"""A throwaway PostgreSQL cluster for tests: Debian's initdb/pg_ctl in a temp dir, trust auth, a unix socket there.

initdb refuses root, so as root the cluster runs as ``nobody`` (``setpriv``), its directory chowned to it; the
cluster is stopped with ``pg_ctl stop -m immediate`` and its directory removed at the end.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Cluster", "find_bindir", "throwaway_cluster"]


@dataclass(frozen=True, slots=True)
class Cluster:
    """A running cluster: ``dsn`` connects to its ``postgres`` database as superuser ``postgres``."""

    socket_dir: str

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}"


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
        subprocess.run([*prefix, pg_ctl, "-D", data, "-o", options, "-l", os.path.join(root, "log"), "-w",
                        "start"], **run)  # type: ignore[call-overload]
        try:
            yield Cluster(sock)
        finally:
            subprocess.run([*prefix, pg_ctl, "-D", data, "stop", "-m", "immediate"], **run)  # type: ignore[call-overload]
    finally:
        shutil.rmtree(root, ignore_errors=True)
