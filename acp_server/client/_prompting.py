"""One prompt's way through a client after its slot is reserved: its request body, the daemon's answer to it, and
following an accepted prompt to its end.

Invariant: the prompt's local slot is released exactly once, the moment its outcome is known to the client; a
prompt its caller gives up on is cancelled on the daemon once (shielded, bounded by :data:`CANCEL_TIMEOUT_S`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from inspect import isawaitable
from typing import Any, Protocol

import anyio

from ._events import PermissionRequestEvent, SessionUpdateEvent
from ._exceptions import (
    DaemonClientError,
    DaemonEventStreamEndedError,
    DaemonPermissionRequestNotFoundError,
    DaemonPromptNotFoundError,
    DaemonProtocolError,
)
from ._limits import PromptSlot
from ._models import PromptInput, PromptResult, prompt_blocks
from ._turn import OnPermission, OnUpdate, TurnItem, TurnTracker, result_of

__all__ = [
    "CANCEL_TIMEOUT_S",
    "Accepted",
    "ItemSource",
    "cancel_abandoned",
    "prompt_answer",
    "prompt_body",
    "run_turn",
]

logger = logging.getLogger("acp_server.client")

CANCEL_TIMEOUT_S = 5.0
"""How long the ``cancel`` posted for an abandoned prompt may take (it runs shielded from the caller's cancel)."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """A ``202`` answer: the prompt's id and the id of its ``prompt_accepted`` event."""

    prompt_id: str
    event_id: int


ItemSource = Callable[[], Awaitable[TurnItem | None]]
"""The next item of a followed prompt; None when the source ran out."""


class TurnOwner(Protocol):
    """What following a prompt needs from its client."""

    @property
    def closed(self) -> bool: ...

    def _events_url(self, session_id: str) -> str: ...

    async def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None: ...

    async def cancel_prompt(self, session_id: str, prompt_id: str) -> None: ...


def prompt_body(prompt: PromptInput, deadline_ms: int | None) -> dict[str, Any]:
    """The JSON body of ``POST /session/{id}/prompt``; a bad prompt or deadline is a ``ValueError`` (nothing sent)."""
    body: dict[str, Any] = {"prompt": prompt_blocks(prompt)}
    if deadline_ms is not None:
        if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int) or deadline_ms <= 0:
            raise ValueError(f"deadline_ms must be a positive integer or None; got {deadline_ms!r}")
        body["deadlineMs"] = deadline_ms
    return body


def prompt_answer(status_code: int, answer: Mapping[str, Any], url: str) -> PromptResult | Accepted:
    """The daemon's answer to a prompt: the 200 result (blocking mode) or the 202 acceptance; anything else is a
    :class:`DaemonProtocolError` naming the request."""
    prompt_id = answer.get("promptId")
    if status_code == 200:
        stop_reason = answer.get("stopReason")
        if isinstance(prompt_id, str) and prompt_id and isinstance(stop_reason, str) and stop_reason:
            return PromptResult(prompt_id, stop_reason)
    else:
        event_id = answer.get("lastEventId")
        if (
            isinstance(prompt_id, str)
            and prompt_id
            and isinstance(event_id, int)
            and not isinstance(event_id, bool)
            and event_id >= 1
        ):
            return Accepted(prompt_id, event_id)
    raise DaemonProtocolError(
        f"POST {url}: unexpected {status_code} answer {dict(answer)!r}",
        method="POST",
        url=url,
        status_code=status_code,
    )


async def run_turn(
    owner: TurnOwner,
    tracker: TurnTracker,
    slot: PromptSlot,
    next_item: ItemSource,
    on_update: OnUpdate | None,
    on_permission: OnPermission | None = None,
) -> PromptResult:
    """Follow an accepted prompt to its end; release its slot the moment its outcome is known. Each permission
    request is answered (``on_permission``'s option, else a rejection) before the next item is read.

    When the caller gives up (cancellation, its ``on_update`` or ``on_permission`` raised, or answering failed)
    the prompt is abandoned: its slot is released and the prompt itself is cancelled on the daemon (shielded,
    bounded).
    """
    in_callback = False
    try:
        while True:
            item = await next_item()
            if item is None:
                raise DaemonEventStreamEndedError(
                    f'The event stream of session "{tracker.session_id}" ended before prompt '
                    f'"{tracker.prompt_id}" did',
                    session_id=tracker.session_id,
                    last_event_id=None,
                )
            if isinstance(item, DaemonClientError):
                raise item
            if isinstance(item, SessionUpdateEvent):
                if on_update is not None:
                    in_callback = True
                    outcome = on_update(item)
                    if isawaitable(outcome):
                        await outcome
                    in_callback = False
                continue
            if isinstance(item, PermissionRequestEvent):
                in_callback = True
                await _answer_request(owner, item, on_permission)
                in_callback = False
                continue
            slot.release()
            return result_of(item)
    except BaseException as exc:
        slot.release()
        abandoned = in_callback or not isinstance(exc, DaemonClientError)
        if abandoned and not tracker.done:
            await cancel_abandoned(owner, tracker)
        raise


async def _answer_request(
    owner: TurnOwner, request: PermissionRequestEvent, on_permission: OnPermission | None
) -> None:
    """Answer one permission request of a followed prompt: ``on_permission``'s option, else its reject option.
    A request no longer pending (its prompt ended meanwhile, or someone else answered) is left alone."""
    if on_permission is None:
        option_id = request.option_id("reject_once") or request.option_id("reject_always")
        if option_id is None:
            url = owner._events_url(request.session_id)
            raise DaemonProtocolError(
                f"permission request {request.request_id} offers no reject option", method="GET", url=url
            )
    else:
        answer = on_permission(request)
        option_id = await answer if isawaitable(answer) else answer
    try:
        await owner.answer_permission(request.session_id, request.request_id, option_id)
    except DaemonPermissionRequestNotFoundError:
        logger.debug("permission request %s was no longer pending", request.request_id)


async def cancel_abandoned(owner: TurnOwner, tracker: TurnTracker) -> None:
    """Cancel exactly the abandoned prompt (waiting: it leaves the daemon's queue; running: it stops); once."""
    if owner.closed or tracker.abandoned:
        return
    tracker.abandoned = True
    with anyio.move_on_after(CANCEL_TIMEOUT_S, shield=True):
        try:
            await owner.cancel_prompt(tracker.session_id, tracker.prompt_id)
        except DaemonPromptNotFoundError:
            pass  # it ended meanwhile
        except DaemonClientError as exc:  # the caller's own exit is what propagates; this one is logged
            logger.warning(
                "could not cancel abandoned prompt %s of session %s: %s", tracker.prompt_id, tracker.session_id, exc
            )
