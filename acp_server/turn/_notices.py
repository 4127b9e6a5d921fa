"""What the user is told beside the conversation: one :class:`RetryNotice` per retry wait, and the notices of a turn's
start (MCP servers whose tools are gone, project instructions that were cut)."""

from __future__ import annotations

import os
from uuid import uuid4

import anyio

from ..domain import Notice, RetryNotice
from ..pipeline import RetryEvent, StreamPolicy
from ._instructions import MAX_INSTRUCTIONS_BYTES, find_instruction_files

__all__ = ["instructions_cut", "retry_notice", "server_notices", "window_notice"]


def _limit(event: RetryEvent, policy: StreamPolicy) -> int:
    """The retries ``event``'s policy allows in all."""
    limits = {
        "stream_transport": policy.stream_max_retries,
        "connect": policy.connect_max_retries,
        "backoff": policy.backoff_max_retries,
        "content": policy.content_max_retries,
    }
    return limits[event.policy]


def retry_notice(event: RetryEvent, policy: StreamPolicy | None = None) -> RetryNotice:
    """The notice of one retry wait: a thought line saying why and for how long (its own line: it never runs into
    the reasoning around it), and its title as a notice: "Retrying the model request (attempt 2 of 4) in 3 s"."""
    reason = event.classification.reason
    text = f"\n(The model request failed: {reason}. Retrying in {event.delay_s:.1f} s, attempt {event.attempt + 1}.)\n"
    delay_ms = round(event.delay_s * 1000)
    of = "" if policy is None else f" of {event.attempt - event.retry + _limit(event, policy) + 1}"
    title = f"Retrying the model request (attempt {event.attempt + 1}{of}) in {round(event.delay_s, 1):g} s"
    message_id = f"retry-{uuid4().hex}"  # a message of its own
    return RetryNotice(text, event.attempt, delay_ms, reason, title, message_id=message_id)


def server_notices(problems: tuple[tuple[str, str], ...]) -> list[Notice]:
    """A warning per MCP server (name, why) that is down at a prompt's start: its tools are gone."""
    return [
        Notice("warning", f"MCP server '{name}' is not running: its tools are unavailable", why)
        for name, why in problems
    ]


async def instructions_cut(cwd: str) -> Notice | None:
    """An info notice naming the project instruction files of ``cwd`` that were cut or left out for want of room
    (None: none were); read like the system prompt reads them, in a worker thread."""
    if not os.path.isabs(cwd):
        return None
    files, left_out = await anyio.to_thread.run_sync(find_instruction_files, cwd, abandon_on_cancel=True)
    names = [file.rel for file in files if file.truncated] + left_out
    if not names:
        return None
    what = f"Project instructions are capped at {MAX_INSTRUCTIONS_BYTES // 1024} KiB"
    return Notice("info", f"Project instructions were cut: {', '.join(names)}", f"{what}; the model reads the rest.")


def window_notice(model: str, window: int) -> Notice:
    """An info notice: the endpoint stated ``model``'s context window when it refused a request as too long."""
    detail = "The endpoint stated it when it refused a request as too long; the conversation is compacted to fit it."
    return Notice("info", f"Learned the context window of {model}: {window:,} tokens", detail)
