"""The agent's own secrets (its model key, its daemon token) out of reach of the commands the model runs.

A command runs as the agent's user, and what it prints goes to the model. Removing a variable from ``os.environ``
does not change what ``/proc/<pid>/environ`` shows: the kernel reads the environment block the process was
started with, and ``/proc/<pid>/cmdline`` the argument block, from the process's memory. So, once the settings are
read, :func:`hide_secrets`:

1. overwrites, in place, the secret values in those two blocks (``OPENAI_API_KEY=…`` / ``ACP_SERVER_TOKEN=…``
   entries are zeroed whole; the value after ``--api-key`` / ``--token`` is zeroed): what ``/proc`` shows no longer
   holds them, to any reader, root included (Linux; elsewhere there is no ``/proc`` to read them from);
2. makes the process not dumpable (``prctl(PR_SET_DUMPABLE, 0)``, what ssh-agent does): a process of the same user
   can no longer open its ``/proc/<pid>/environ``, ``mem``, ``fd/`` nor attach a debugger. Root (or a process with
   ``CAP_SYS_PTRACE``) still can; nothing inside a process keeps its memory from root.

A command line is readable by every local user from the start of the process until step 1 (a fraction of a second
of interpreter start-up): ``--api-key`` and ``--token`` are for tries; the environment is the way to pass them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable
from typing import BinaryIO

__all__ = ["hide_secrets"]

logger = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4


def _blocks() -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The address ranges of the argument and environment blocks (``/proc/self/stat`` fields 48–51)."""
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rpartition(")")[2].split()
        arg_start, arg_end, env_start, env_end = (int(fields[index - 3]) for index in (48, 49, 50, 51))
    except (OSError, ValueError, IndexError):
        return None
    if not (0 < arg_start <= arg_end and 0 < env_start <= env_end):
        return None
    return (arg_start, arg_end), (env_start, env_end)


def _read(mem: BinaryIO, start: int, end: int) -> bytes:
    mem.seek(start)
    return mem.read(end - start)


def _zero(mem: BinaryIO, address: int, length: int) -> None:
    if length > 0:
        mem.seek(address)
        mem.write(b"\0" * length)


def _scrub_environment(mem: BinaryIO, start: int, end: int, names: frozenset[str]) -> int:
    """Zero the ``NAME=value`` entries of ``names`` in the environment block; returns how many."""
    block = _read(mem, start, end)
    prefixes = tuple(f"{name}=".encode() for name in names)
    offset = count = 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefixes):
            _zero(mem, start + offset, len(entry))
            count += 1
        offset += len(entry) + 1
    return count


def _scrub_arguments(mem: BinaryIO, start: int, end: int, flags: frozenset[str]) -> int:
    """Zero the values of ``flags`` (``--flag VALUE`` and ``--flag=VALUE``) in the argument block; the block's
    final NUL stays (without it the kernel would read the command line on into the environment)."""
    block = _read(mem, start, end)
    encoded = {flag.encode() for flag in flags}
    offset = count = 0
    previous = b""
    for argument in block.split(b"\0"):
        if previous in encoded:
            _zero(mem, start + offset, len(argument))
            count += 1
        else:
            flag, equals, _ = argument.partition(b"=")
            if equals and flag in encoded:
                _zero(mem, start + offset + len(flag) + 1, len(argument) - len(flag) - 1)
                count += 1
        if argument == b"--":
            break
        previous = argument
        offset += len(argument) + 1
    return count


def _not_dumpable() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            logger.warning("could not make the agent non-dumpable: %s", os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        logger.warning("could not make the agent non-dumpable: %s", exc)


def hide_secrets(env_names: Iterable[str], flags: Iterable[str]) -> None:
    """Hide this process's secrets from other processes of its user (see the module docstring): the variables
    ``env_names`` in its environment block and the values of ``flags`` in its argument block. ``os.environ`` and
    ``sys.argv`` (copies) are untouched. Linux only; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    blocks = _blocks()
    if blocks is not None:
        (arg_start, arg_end), (env_start, env_end) = blocks
        try:  # through /proc/self/mem, not pointers: a wrong address is an OSError, never a crash
            with open("/proc/self/mem", "r+b", buffering=0) as mem:
                _scrub_environment(mem, env_start, env_end, frozenset(env_names))
                _scrub_arguments(mem, arg_start, arg_end, frozenset(flags))
        except OSError as exc:
            logger.warning("could not hide the secrets from /proc: %s", exc.strerror or exc)
    _not_dumpable()
