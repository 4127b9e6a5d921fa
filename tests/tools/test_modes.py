"""The modes as one type: what each offers follows from the tools' kinds (no list of names to drift), when each
asks, the fail-safe reading of an unknown mode, and the one "read-only without a token" rule."""

from __future__ import annotations

from acp_server.modes import (
    BYPASS_MODE,
    MODES,
    READ_ONLY_MODE,
    SANDBOX_MODE,
    available_modes,
    mode_named,
    needs_asking,
    tokenless_problem,
)
from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES
from acp_server.tools.builtin import BUILTIN, BUILTIN_TOOLS
from acp_server.tools.builtin._tool import READ_ONLY_KINDS


def test_read_only_follows_from_the_kind_and_every_mode_offers_by_it() -> None:
    assert {tool.name for tool in BUILTIN_TOOLS if tool.kind in READ_ONLY_KINDS} == READ_ONLY_TOOLS
    assert "update_plan" in READ_ONLY_TOOLS  # the tool the old hand-written table left out
    for mode in MODES.values():
        offered = BUILTIN.offered(mode.id)
        assert offered == (TOOL_NAMES if mode.changes else tuple(n for n in TOOL_NAMES if n in READ_ONLY_TOOLS))
    assert BUILTIN.offered("no such mode") == BUILTIN.offered(READ_ONLY_MODE)


def test_when_each_mode_asks() -> None:
    asked = {mode.id: (needs_asking(mode.id, "edit"), needs_asking(mode.id, "execute")) for mode in MODES.values()}
    assert asked == {
        "default": (True, True),
        "accept-edits": (False, True),
        READ_ONLY_MODE: (True, True),
        BYPASS_MODE: (False, False),
        SANDBOX_MODE: (False, True),
    }
    # sandbox mode: a command that runs inside the sandbox never asks; one outside it does
    assert not needs_asking(SANDBOX_MODE, "execute", sandboxed=True)
    assert needs_asking("default", "execute", sandboxed=True)
    assert mode_named("no such mode") is MODES[READ_ONLY_MODE] and needs_asking("no such mode", "other")


def test_without_a_token_only_modes_that_change_nothing() -> None:
    assert [m.id for m in available_modes(allow_bypass=True, token=False)] == [READ_ONLY_MODE]
    assert [m.id for m in available_modes(allow_bypass=False)] == ["default", "accept-edits", READ_ONLY_MODE]
    # sandbox mode is offered where the sandbox works, never without a token (it runs commands)
    assert SANDBOX_MODE in [m.id for m in available_modes(allow_bypass=False, sandbox=True)]
    assert [m.id for m in available_modes(allow_bypass=True, token=False, sandbox=True)] == [READ_ONLY_MODE]
    assert "needs --token" in (tokenless_problem(default_mode=SANDBOX_MODE, allow_bypass=False) or "")
    assert tokenless_problem(default_mode=None, allow_bypass=False) is None
    assert tokenless_problem(default_mode=READ_ONLY_MODE, allow_bypass=False) is None
    assert "--default-mode accept-edits needs --token" in (
        tokenless_problem(default_mode="accept-edits", allow_bypass=False) or ""
    )
    assert "--allow-bypass-permissions needs --token" in (tokenless_problem(default_mode=None, allow_bypass=True) or "")
