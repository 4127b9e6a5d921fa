"""Session modes: which tools the model is offered and which calls wait for the user's permission (ground floor: the
bridge stores a session's mode, the tools' registry and the turn apply it, every face offers it).

A :class:`Mode` owns both rules: :meth:`Mode.offers` (every tool, or only the read-only ones: the tools whose kind
changes nothing, whatever their source) and :meth:`Mode.asks` (which calls that change something wait for the
user). Help texts and the ``/mode`` command format from :data:`MODES` and the defaults here; no list of tool names
is kept here, so none can drift from the tools. A mode id that is no mode is treated as ``read-only`` (fail safe:
:func:`mode_named`).

A session's "always" answers (``allow_always`` / ``reject_always``, per tool kind; per tool for an MCP server's)
apply on top of the mode. An MCP server's tool is read-only when annotated ``readOnlyHint``, else a command.

Where anyone on the host may send prompts (a daemon without a token), only ``read-only`` is offered — the one
place that rule lives is :func:`available_modes` (``token=False``) and :func:`tokenless_problem`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "ASK_MODE",
    "BYPASS_MODE",
    "DEFAULT_MODE",
    "MODES",
    "READ_ONLY_MODE",
    "SANDBOX_MODE",
    "Mode",
    "available_modes",
    "mode_named",
    "needs_asking",
    "tokenless_problem",
]

DEFAULT_MODE = "default"
"""A new session's mode unless the server is told otherwise."""
READ_ONLY_MODE = "read-only"
BYPASS_MODE = "bypass-permissions"
SANDBOX_MODE = "sandbox"
"""Edits as ``accept-edits``; commands without asking, inside the kernel sandbox (offered only where it works)."""
ASK_MODE = READ_ONLY_MODE
"""``acp-server ask``'s mode unless ``--mode`` says otherwise: a question from the shell reads and searches."""


@dataclass(frozen=True, slots=True)
class Mode:
    """One mode. ``changes``: tools that change something (edits, commands, an MCP server's other tools) are
    offered; ``asks_edits``/``asks_commands``: such a call of kind ``edit``/any other kind waits for the user;
    ``sandboxed``: commands run inside the kernel sandbox, and a sandboxed call never waits."""

    id: str
    name: str
    description: str
    changes: bool
    asks_edits: bool
    asks_commands: bool
    sandboxed: bool = False

    def offers(self, read_only: bool) -> bool:
        """Whether a tool (``read_only``: it changes nothing) is offered to the model in this mode."""
        return read_only or self.changes

    def asks(self, kind: str, sandboxed: bool = False) -> bool:
        """Whether a call of ``kind`` that changes something waits for the user's permission in this mode
        (``sandboxed``: the call runs inside the sandbox, which this mode lets run unasked when it is one)."""
        if sandboxed and self.sandboxed:
            return False
        return self.asks_edits if kind == "edit" else self.asks_commands


MODES: Mapping[str, Mode] = MappingProxyType(
    {
        mode.id: mode
        for mode in (
            Mode(DEFAULT_MODE, "Default", "Ask before every edit and every command", True, True, True),
            Mode(
                "accept-edits", "Accept edits", "Edit files without asking; ask before every command", True, False, True
            ),
            Mode(READ_ONLY_MODE, "Read only", "Read and search only: no edits, no commands", False, True, True),
            Mode(
                SANDBOX_MODE,
                "Sandbox",
                "Edit files in the project and run commands without asking, inside a sandbox: no network, no writes "
                "outside the project, your keys and credentials hidden; ask to run anything outside it",
                True,
                False,
                True,
                sandboxed=True,
            ),
            Mode(BYPASS_MODE, "Bypass permissions", "Edit files and run commands without asking", True, False, False),
        )
    }
)
"""Every mode by id, in the order they are offered."""


def mode_named(mode_id: str) -> Mode:
    """The mode ``mode_id`` names; ``read-only`` for an id that is no mode (fail safe)."""
    return MODES.get(mode_id) or MODES[READ_ONLY_MODE]


def needs_asking(mode_id: str, kind: str, sandboxed: bool = False) -> bool:
    """Whether a call of ``kind`` (``sandboxed``: to run inside the sandbox) that changes something waits for the
    user's permission in ``mode_id``."""
    return mode_named(mode_id).asks(kind, sandboxed)


def available_modes(*, allow_bypass: bool, token: bool = True, sandbox: bool = False) -> tuple[Mode, ...]:
    """The modes a session may switch to: ``bypass-permissions`` only when the server was started allowing it,
    ``sandbox`` only where the sandbox works (``sandbox``); without a token (anyone on the host may call a
    loopback daemon) only the modes that change nothing (``sandbox`` runs commands: not offered)."""
    return tuple(
        mode
        for mode in MODES.values()
        if (allow_bypass or mode.id != BYPASS_MODE)
        and (sandbox or mode.id != SANDBOX_MODE)
        and (token or not mode.changes)
    )


def tokenless_problem(*, default_mode: str | None, allow_bypass: bool) -> str | None:
    """Why a server without a token cannot start with these settings (None: it can): a ``default_mode`` asked for
    (None: not asked) that changes something, or bypass allowed."""
    if default_mode is not None and mode_named(default_mode).changes:
        return (
            f"--default-mode {default_mode} needs --token: a daemon without a token offers only the "
            f"{READ_ONLY_MODE} mode"
        )
    if allow_bypass:
        return (
            f"--allow-bypass-permissions needs --token: a daemon without a token offers only the {READ_ONLY_MODE} mode"
        )
    return None
