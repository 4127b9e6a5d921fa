"""Landlock through ctypes: :func:`abi` (0: none), and run as a script (``python -I -S _landlock.py [--no-network]
--write DIR ... -- argv``) it confines itself, then runs ``argv`` as its child and, as a subreaper, kills every
process left when that child ends (``setsid`` daemons included) before exiting with its status.

Invariant: nothing is run unless the ruleset was applied (any failure exits 126 with the reason on stderr). Writes
are allowed beneath the ``--write`` directories only (and to the devices under ``/dev``); reads are not confined
(Landlock cannot hide a file under a readable parent); ``--no-network`` denies TCP bind and connect (ABI 4+).
Standard library only: it runs with ``-I -S``.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # not ``signal``: it imports enum, ~2 ms of this helper's start-up
import ctypes
import os
import sys

_CREATE, _ADD, _RESTRICT = 444, 445, 446  # the same numbers on every Linux architecture (the generic table)
_VERSION = 1
_PATH_BENEATH, _NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 38, 36
_WRITE_FILE = 1 << 1
_WRITES = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("fs", ctypes.c_uint64), ("net", ctypes.c_uint64))


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (not Linux, not built in, or disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = int(_libc().syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION)))
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def _confine(writable: list[str], no_network: bool) -> None:
    libc = _libc()
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available")
    writes = _WRITES | (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if no_network and version >= 4 else 0
    attr = _RulesetAttr(writes, net)
    size = ctypes.sizeof(attr) if version >= 4 else 8
    ruleset = int(libc.syscall(_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    for path, allowed in (*((p, writes) for p in writable), ("/dev", _WRITE_FILE | (_TRUNCATE if version >= 3 else 0))):
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = _PathBeneath(allowed, fd)
            if libc.syscall(_ADD, ctypes.c_int(ruleset), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule), 0) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(fd)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if libc.syscall(_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)


def _children() -> list[int]:
    found: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as file:
                found += [int(pid) for pid in file.read().split()]
        except OSError:
            pass
    return found


def _reap_all() -> None:
    """Kill and reap every descendant (orphans come to this subreaper) until none is left."""
    while True:
        for pid in _children():
            try:  # noqa: SIM105 - contextlib costs ~4 ms of start-up here
                os.kill(pid, _signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def main(argv: list[str]) -> int:
    writable: list[str] = []
    no_network = False
    while argv and argv[0] != "--":
        flag = argv.pop(0)
        if flag == "--no-network":
            no_network = True
        elif flag == "--write" and argv:
            writable.append(argv.pop(0))
        else:
            sys.stderr.write(f"sandbox: unknown argument {flag}\n")
            return 126
    command = argv[1:]
    if not command:
        sys.stderr.write("sandbox: no command\n")
        return 126
    try:
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _confine(writable, no_network)
    except OSError as exc:
        sys.stderr.write(f"sandbox: Landlock could not be applied: {exc}\n")
        return 126
    child = os.fork()
    if child == 0:
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _signal.signal(_signal.SIGTERM, lambda number, frame: os.kill(child, _signal.SIGTERM))
    _, status = os.waitpid(child, 0)
    _reap_all()
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
