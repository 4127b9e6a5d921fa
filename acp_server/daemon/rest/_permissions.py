"""Permission requests over HTTP: the daemon's :class:`~acp_server.tools.PermissionAsker` and each session's pending
one.

A daemon prompt's tools run on the daemon's host, in the session's cwd, confined as over stdio: its
:class:`~acp_server.tools.ToolClient` has the permission part only (no file system, no terminal). A call that needs
asking publishes ``permission_request`` on the session's event stream — after the prompt's earlier events, so it
never overtakes the ``tool_call`` it is about — and waits for ``POST /session/{id}/permission/{requestId}``.

Invariants: a session has at most one pending request (one prompt of a session runs at a time and its calls ask one
after the other), so the table is bounded by the sessions; a request is pending from the publication of its event
until it is answered or its wait ends with the prompt (cancel, deadline, close — the turn's task is cancelled) or is
withdrawn (the session's mode stopped offering the tool): the entry goes in a ``finally``, so a late answer is a 404,
never a leak. Its end is published once, ``permission_request_ended {sessionId, promptId, requestId, outcome}``:
``answered`` when a POST answered it, ``withdrawn`` when it ended unanswered (unless the session is closing: then
``session_closed`` says it).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio

from ...acp import update_from_event
from ...domain import ToolCallStarted
from ...tools import PERMISSION_OPTIONS, PermissionChoice, permission_choice
from .._exceptions import InvalidRequestError, PermissionRequestNotFoundError

if TYPE_CHECKING:
    from ...bridge import PromptHandle
    from ._event_log import EventLog

__all__ = ["DaemonPermission", "PermissionDesk"]


class _Pending:
    __slots__ = ("answered", "choice", "prompt_id", "request_id")

    def __init__(self, request_id: str, prompt_id: str) -> None:
        self.request_id = request_id
        self.prompt_id = prompt_id
        self.choice: PermissionChoice = "reject_once"
        self.answered = anyio.Event()


class PermissionDesk:
    """One session's pending permission request (at most one), published on its event log, answered by id."""

    def __init__(self, session_id: str, log: EventLog) -> None:
        self.session_id = session_id
        self._log = log
        self._pending: _Pending | None = None

    @property
    def pending_request_id(self) -> str | None:
        """The id of the request waiting for an answer, if one is."""
        return None if self._pending is None else self._pending.request_id

    async def ask(self, prompt_id: str, call: ToolCallStarted) -> PermissionChoice:
        """Publish ``permission_request`` for ``call`` and wait for its answer (cancelled with the prompt)."""
        if self._pending is not None:
            raise RuntimeError(
                f"session {self.session_id} already waits for permission request "
                f"{self._pending.request_id}: calls run one after the other"
            )
        if self._log.closed:  # the session is being closed: its prompt is ending
            return "reject_once"
        pending = self._pending = _Pending(uuid.uuid4().hex, prompt_id)
        try:
            update = dict(update_from_event(self.session_id, call)["update"])
            del update["sessionUpdate"]
            self._log.publish(
                "permission_request",
                {
                    "sessionId": self.session_id,
                    "promptId": prompt_id,
                    "requestId": pending.request_id,
                    "toolCall": update,
                    "options": list(PERMISSION_OPTIONS),
                },
            )
            await pending.answered.wait()
            return pending.choice
        finally:
            if self._pending is pending:
                self._pending = None
            if not pending.answered.is_set() and not self._log.closed:
                self._ended(pending, "withdrawn")

    def answer(self, request_id: str, option_id: str) -> None:
        """Answer the pending request ``request_id`` with ``option_id``; it is no longer pending once this returns.

        Raises :class:`PermissionRequestNotFoundError` when it is not pending here, and ``InvalidRequestError``
        (the request stays pending) for an option it does not offer.
        """
        pending = self._pending
        if pending is None or pending.request_id != request_id:
            raise PermissionRequestNotFoundError(self.session_id, request_id)
        choice = permission_choice(option_id)
        if choice is None:
            offered = ", ".join(option["optionId"] for option in PERMISSION_OPTIONS)
            problem = f"unknown option {option_id!r}; options: {offered}"
            raise InvalidRequestError.for_field("optionId", problem)
        pending.choice = choice
        self._pending = None
        pending.answered.set()
        self._ended(pending, "answered")

    def _ended(self, pending: _Pending, outcome: str) -> None:
        self._log.publish(
            "permission_request_ended",
            {
                "sessionId": self.session_id,
                "promptId": pending.prompt_id,
                "requestId": pending.request_id,
                "outcome": outcome,
            },
        )


class DaemonPermission:
    """One daemon prompt's :class:`~acp_server.tools.PermissionAsker`, over the session's event stream: the daemon's
    :class:`~acp_server.tools.ToolClient` has no other part (the tools read, write and run commands themselves).
    :meth:`bind` it to the prompt's handle before its turn runs."""

    def __init__(self, desk: PermissionDesk) -> None:
        self._desk = desk
        self._handle: PromptHandle | None = None

    def bind(self, handle: PromptHandle) -> None:
        self._handle = handle

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        """Once the prompt's earlier events are published (its ``tool_call`` first), ask and wait."""
        handle = self._handle
        if handle is None:
            raise RuntimeError("DaemonPermission.request_permission before bind()")
        await handle.events.wait_delivered()
        return await self._desk.ask(handle.prompt_id, call)
