"""The collector is paused only for the imports, and what they left is frozen: each case in a fresh interpreter
(a freeze is process-wide)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_the_window_pauses_then_freezes_and_resumes() -> None:
    code = (
        "import gc\n"
        "from acp_server.collector import paused_for_imports\n"
        "before = gc.get_freeze_count()\n"
        "with paused_for_imports():\n"
        "    inside = gc.isenabled()\n"
        "    import json, email.parser\n"
        "print(inside, gc.isenabled(), before, gc.get_freeze_count() > before + 1000)\n"
    )
    assert _run(code) == "False True 0 True"


def test_without_freeze_nothing_is_frozen() -> None:
    code = (
        "import gc\n"
        "from acp_server.collector import paused_for_imports\n"
        "with paused_for_imports(freeze=False):\n"
        "    import json\n"
        "print(gc.isenabled(), gc.get_freeze_count())\n"
    )
    assert _run(code) == "True 0"


@pytest.mark.parametrize("collector_was_running", [True, False])
def test_an_import_that_fails_still_resumes_what_ran_before(collector_was_running: bool) -> None:
    code = (
        "import gc\n"
        "from acp_server.collector import paused_for_imports\n"
        f"{'gc.enable()' if collector_was_running else 'gc.disable()'}\n"
        "try:\n"
        "    with paused_for_imports():\n"
        "        import no_such_module_here\n"
        "except ImportError:\n"
        "    pass\n"
        "print(gc.isenabled())\n"
    )
    assert _run(code) == str(collector_was_running)


def test_two_overlapping_windows_leave_the_collector_running_whichever_closes_first() -> None:
    code = (
        "import gc\n"
        "from acp_server.collector import paused_for_imports\n"
        "first, second = paused_for_imports(), paused_for_imports()\n"
        "first.__enter__(); second.__enter__()\n"
        "first.__exit__(None, None, None)\n"
        "after_first = gc.isenabled()\n"
        "second.__exit__(None, None, None)\n"
        "print(after_first, gc.isenabled())\n"
    )
    assert _run(code) == "True True"


def test_the_agents_start_imports_no_search_or_schema_checking_library() -> None:
    """grep's ``regex`` and the MCP tools' ``jsonschema`` load at their first use: an agent that never greps nor
    calls an MCP tool never pays for them."""
    code = (
        "import sys\n"
        "import acp_server.cli._stdio, acp_server.daemon\n"
        "print(sorted(m for m in ('regex', 'jsonschema') if m in sys.modules))\n"
    )
    assert _run(code) == "[]"
