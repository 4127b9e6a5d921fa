"""Start-up hiding of the agent's secrets: the environment and argument blocks ``/proc`` shows are scrubbed in
place and the process is not dumpable (a real process; its ``/proc`` read from outside)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.cli._secrets import _scrub_arguments, _scrub_environment
from acp_server.config import SECRET_OPTIONS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")

_CHILD = """
import ctypes, sys
from acp_server.cli._secrets import hide_secrets
hide_secrets(["MY_SECRET"], ["--api-key", "--token"])
print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), flush=True)  # PR_GET_DUMPABLE
sys.stdin.read()
"""


def test_the_secret_options_are_the_key_the_token_and_the_store_url() -> None:
    assert {(o.flag, o.env) for o in SECRET_OPTIONS} == {
        ("--api-key", "OPENAI_API_KEY"),
        ("--token", "ACP_SERVER_TOKEN"),
        ("--store", "ACP_SERVER_STORE"),
    }


def test_environment_entries_are_zeroed_whole_and_nothing_else() -> None:
    block = ctypes.create_string_buffer(b"A=1\0MY_SECRET=s3cr3t\0MY_SECRET_NOT=keep\0B=2\0", 44)
    start = ctypes.addressof(block)
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        assert _scrub_environment(mem, start, start + 44, frozenset({"MY_SECRET"})) == 1
    assert block.raw == b"A=1\0" + b"\0" * 17 + b"MY_SECRET_NOT=keep\0B=2\0"


def test_flag_values_are_zeroed_in_both_spellings_up_to_a_double_dash() -> None:
    raw = b"python\0--api-key\0k1\0--token=t2\0--model\0m\0--\0--api-key\0text\0"
    block = ctypes.create_string_buffer(raw, len(raw))
    start = ctypes.addressof(block)
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        assert _scrub_arguments(mem, start, start + len(raw), frozenset({"--api-key", "--token"})) == 2
    assert block.raw == b"python\0--api-key\0\0\0\0--token=\0\0\0--model\0m\0--\0--api-key\0text\0"


def test_a_started_process_shows_neither_secret_in_proc_and_is_not_dumpable() -> None:
    env = {**os.environ, "MY_SECRET": "env-s3cr3t-value"}
    command = [sys.executable, "-c", _CHILD, "--api-key", "flag-s3cr3t-value", "--token=tok-s3cr3t-value"]
    with subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None and child.stdin is not None
        try:
            assert child.stdout.readline().strip() == "0"  # not dumpable
            cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes()  # readable by every user
            try:
                environ: bytes | None = Path(f"/proc/{child.pid}/environ").read_bytes()
            except PermissionError:  # not root: a non-dumpable process's environment cannot be opened at all
                environ = None
        finally:
            child.stdin.close()
    assert b"s3cr3t" not in cmdline
    assert b"--api-key\0" + b"\0" * len("flag-s3cr3t-value") + b"\0--token=\0" in cmdline
    if environ is None:
        assert os.geteuid() != 0
    else:
        assert b"s3cr3t" not in environ and b"PATH=" in environ


def test_an_address_that_is_not_mapped_is_an_error_not_a_crash() -> None:
    with open("/proc/self/mem", "r+b", buffering=0) as mem, pytest.raises(OSError):
        _scrub_environment(mem, 4096, 8192, frozenset({"MY_SECRET"}))
