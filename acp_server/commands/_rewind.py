"""``/rewind``: without an argument, the session's prompts (number, first line, files changed); with ``N``, the
files the prompts from N on changed put back and the conversation rewound to before prompt N (``--files-only``,
``--conversation-only``; ``--force`` overwrites files changed since by someone else). The work is the checkpoints'
(:mod:`acp_server.checkpoints`); this is its text face."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..checkpoints import CheckpointError, Rewindable, list_prompts, rewind

if TYPE_CHECKING:
    from ..tools import ToolClient

__all__ = ["REWIND_USAGE", "run_rewind"]

REWIND_USAGE = "/rewind [N] [--files-only | --conversation-only] [--force]"

_FLAGS = {"--files-only", "--conversation-only", "--force"}


def _listing(session: Rewindable) -> str:
    prompts = list_prompts(session)
    if not prompts:
        return "No prompt to rewind to yet."
    lines = ["Prompts of this session (/rewind N puts the files and the conversation back as before prompt N):"]
    for entry in prompts:
        if entry.files is None:
            changed = "files: no checkpoint kept"
        elif not entry.files:
            changed = "no file changed"
        else:
            shown = ", ".join(entry.files[:5]) + (f" and {len(entry.files) - 5} more" if len(entry.files) > 5 else "")
            changed = f"{len(entry.files)} file{'' if len(entry.files) == 1 else 's'} changed: {shown}"
        lines.append(f"{entry.number}. {entry.first_line or '(no text)'} — {changed}")
    lines.append(f"\nUsage: {REWIND_USAGE}")
    return "\n".join(lines)


async def run_rewind(session: Rewindable, argument: str, client: ToolClient | None) -> str:
    """What ``/rewind <argument>`` does, as the text the user is answered (a refusal included: nothing changed)."""
    words = argument.split()
    flags = {word for word in words if word.startswith("--")}
    rest = [word for word in words if not word.startswith("--")]
    if flags - _FLAGS or len(rest) > 1 or (rest and not rest[0].isdigit()) or not (rest or not flags):
        return f"Usage: {REWIND_USAGE} (without N: the prompts are listed)."
    if not rest:
        return _listing(session)
    if {"--files-only", "--conversation-only"} <= flags:
        return "--files-only and --conversation-only exclude each other (without either, both are rewound)."
    files = "--conversation-only" not in flags
    try:
        outcome = await rewind(
            session,
            int(rest[0]),
            files=files,
            conversation="--files-only" not in flags,
            force="--force" in flags,
            writer=None if client is None else client.writer,
        )
    except CheckpointError as exc:
        text = str(exc)
        return text[:1].upper() + text[1:]
    return outcome.text(files)
