"""The shapes of the agent's replies that depend on no connection: ``initialize``'s capabilities, ``session/list``'s
``SessionInfo``, and a prompt's usage totals."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain import UsageReported

if TYPE_CHECKING:
    from ..bridge import SessionBridge
    from ..store import SessionRecord

__all__ = ["UsageTotals", "capabilities", "iso", "session_info"]


def capabilities(bridge: SessionBridge) -> dict[str, Any]:
    """``agentCapabilities`` of ``initialize``: what this agent supports, its queue's rules, its store's state."""
    limit = bridge.limit
    store = bridge.store
    problem = store.problem
    return {
        "loadSession": True,
        "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": True},
        "sessionCapabilities": {
            "list": {},
            "resume": {},
            "close": {},
            "fork": {},
            "delete": {},
            "additionalDirectories": {},
            "title": {},  # unstable: session/set_title
            "status": {},  # unstable: session/status
            "systemPrompt": {"mode": {"override": {}}},  # unstable: a client's systemPrompt, append and override
        },
        "_meta": {
            "acpServer": {
                "promptQueue": {
                    "maxPendingPromptsPerSession": limit,
                    "queuesWhileRunning": True,
                    "order": "fifo",
                    "whenFull": {"code": -32603, "errorKind": "prompt_queue_full", "retryable": True},
                    "cancelScope": "session",
                    "withdrawWaiting": "$/cancel_request",
                },
                "sessionStore": {
                    "persistent": store.persistent,
                    "available": problem is None,
                    **({"errorKind": problem.error_kind, "message": str(problem)} if problem else {}),
                },
            }
        },
    }


def iso(moment: datetime) -> str:
    """A moment in ISO 8601 UTC, as ACP spells timestamps."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def session_info(record: SessionRecord) -> dict[str, Any]:
    """``SessionInfo`` of ``session/list``: timestamps in ISO 8601 UTC, the additional directories as last activated."""
    info: dict[str, Any] = {"sessionId": record.session_id, "cwd": record.cwd, "updatedAt": iso(record.updated_at)}
    if record.additional_directories:  # omitted and empty mean the same: none
        info["additionalDirectories"] = list(record.additional_directories)
    if record.title:
        info["title"] = record.title
    ours: dict[str, Any] = {"createdAt": iso(record.created_at)}
    if record.task_of is not None:  # a subagent child, listed under its parent only
        ours["parentId"] = record.task_of
    info["_meta"] = {"acpServer": ours}
    return info


class UsageTotals:
    """A prompt's token usage summed over its model requests (``_meta.acpServer.usage`` of its answer)."""

    __slots__ = ("input", "output", "requests")

    def __init__(self) -> None:
        self.input = self.output = self.requests = 0

    def add(self, event: UsageReported) -> None:
        self.input += event.input_tokens
        self.output += event.output_tokens
        self.requests += 1

    def meta(self) -> dict[str, Any]:
        usage = {"inputTokens": self.input, "outputTokens": self.output, "totalTokens": self.input + self.output}
        return {"acpServer": {"usage": {**usage, "requests": self.requests}}}
