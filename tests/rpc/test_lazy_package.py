"""``acp_server.rpc`` imports a submodule only when one of its names is used: the shell client (``ask``) frames
NDJSON without importing the agent stack that :class:`~acp_server.rpc.Connection` binds."""

from __future__ import annotations

import subprocess
import sys

import pytest

import acp_server.rpc as rpc


def test_every_exported_name_resolves_from_the_module_that_defines_it() -> None:
    assert sorted(rpc._WHERE) == sorted(rpc.__all__)
    for name in rpc.__all__:
        value = getattr(rpc, name)
        assert value is getattr(sys.modules[f"acp_server.rpc.{rpc._WHERE[name]}"], name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        _ = rpc.Nothing  # type: ignore[attr-defined]


def test_the_framing_alone_loads_neither_the_agent_stack_nor_pygls() -> None:
    probe = (
        "import sys\n"
        "from acp_server.rpc import DEFAULT_MAX_LINE_BYTES, decode_line, iter_lines\n"
        "import acp_server.cli._ask\n"
        "print(sorted(m for m in ('acp_server.acp', 'acp_server.bridge', 'pygls', 'openai') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
