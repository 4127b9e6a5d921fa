"""``_acp-server/rewind``: the rewind for clients that want a button. ``{sessionId}`` lists the prompts;
``{sessionId, prompt: N, preview: true}`` answers the files a rewind to before prompt N would change, each with its
diff, and the conflicts; ``{sessionId, prompt: N}`` (``filesOnly``, ``conversationOnly``, ``force``) runs it. A
conflict is an error (``errorKind: rewind_conflict``, ``conflicts``); so is a session with a prompt running or
waiting (the method does not queue: ``/rewind`` does)."""

from __future__ import annotations

from typing import Any

from ..bridge import SessionBridge
from ..checkpoints import RewindBusyError, list_prompts, preview, rewind
from ..errors import InvalidInputError
from ..tools import EditorWriter

__all__ = ["REWIND_METHOD", "check_rewind", "run_rewind_method"]

REWIND_METHOD = "_acp-server/rewind"

_FLAGS = ("preview", "filesOnly", "conversationOnly", "force")


def _refuse(field: str, problem: str) -> InvalidInputError:
    return InvalidInputError.for_field(field, problem, f"Invalid params for {REWIND_METHOD}: {field}: {problem}")


def check_rewind(params: Any) -> tuple[str, int | None, dict[str, bool]]:
    """The session id, the prompt number (None: list) and the flags of a rewind request."""
    if not isinstance(params, dict):
        raise _refuse("(root)", "expected an object")
    session_id, number = params.get("sessionId"), params.get("prompt")
    if not isinstance(session_id, str) or not session_id:
        raise _refuse("sessionId", "must be a non-empty string")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 1):
        raise _refuse("prompt", "must be a prompt number (1 or more)")
    flags: dict[str, bool] = {}
    for name in _FLAGS:
        value = params.get(name, False)
        if not isinstance(value, bool):
            raise _refuse(name, "must be a boolean")
        flags[name] = value
    if flags["filesOnly"] and flags["conversationOnly"]:
        raise _refuse("conversationOnly", "excludes filesOnly")
    if number is None and any(flags.values()):
        raise _refuse("prompt", "is needed with preview, filesOnly, conversationOnly or force")
    return session_id, number, flags


async def run_rewind_method(bridge: SessionBridge, params: Any, writer: EditorWriter | None) -> dict[str, Any]:
    """Answer one ``_acp-server/rewind`` request (``writer``: the editor's ``fs/write_text_file``, if offered)."""
    session_id, number, flags = check_rewind(params)
    entry = bridge.get(session_id)
    if number is None:
        return {"prompts": [prompt.wire() for prompt in list_prompts(entry)]}
    if flags["preview"]:
        return await preview(entry, number)
    if entry.pending_prompt_count:
        raise RewindBusyError(session_id)
    outcome = await rewind(
        entry,
        number,
        files=not flags["conversationOnly"],
        conversation=not flags["filesOnly"],
        force=flags["force"],
        writer=writer,
    )
    return outcome.wire()
