"""A session's turns: submit a prompt, cancel one or all, answer a permission request, follow the event stream.

Invariant: admission is synchronous (a refusal raises before any byte of an acceptance is sent), and a ``?wait=true``
prompt never outlives its only waiter (a disconnect cancels it).
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...acp import load_schema, model, prompt_from_blocks, validate
from ...domain import Prompt, StopReason
from .._exceptions import InvalidRequestError
from ._disconnect import wait_disconnected
from ._request import daemon_of, flag, json_object, last_event_id, required_str
from ._sse import EventStreamResponse

__all__ = ["MAX_DEADLINE_MS", "answer_permission", "cancel", "cancel_prompt", "events", "prompt"]

_PROMPT_FIELDS = frozenset({"prompt", "deadlineMs"})
_ANSWER_FIELDS = frozenset({"optionId"})
MAX_DEADLINE_MS = 2**31 - 1
"""The longest per-prompt ``deadlineMs`` (~24.8 days, JavaScript's longest timer): longer is a 400, not an overflow."""


def _parse_prompt(body: dict[str, Any]) -> tuple[Prompt, int | None]:
    """``{prompt: ContentBlock[], deadlineMs?}`` → domain prompt + per-prompt deadline (ACP schema validation)."""
    if "prompt" not in body:
        raise InvalidRequestError.for_field("prompt", "Field required")
    request: Any = validate(model("PromptRequest"), {"sessionId": "-", "prompt": body["prompt"]}, "prompt")
    prompt = prompt_from_blocks(request.prompt)  # empty → 400
    deadline = body.get("deadlineMs")
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int) or deadline <= 0):
        raise InvalidRequestError.for_field(
            "deadlineMs", "must be a positive integer", "deadlineMs must be a positive integer"
        )
    if deadline is not None and deadline > MAX_DEADLINE_MS:
        raise InvalidRequestError(
            f"deadlineMs must be at most {MAX_DEADLINE_MS}",
            [{"field": "deadlineMs", "message": f"must be at most {MAX_DEADLINE_MS}"}],
        )
    return prompt, deadline


async def prompt(request: Request) -> Response:
    """``POST /session/{id}/prompt`` → 202 ``{promptId, lastEventId}``; with ``?wait=true`` 200 ``{promptId,
    stopReason}`` once it ends."""
    daemon = daemon_of(request)
    session_id: str = request.path_params["session_id"]
    wait = flag(request, "wait")
    body = await json_object(request, _PROMPT_FIELDS)
    await load_schema()  # not on the loop: a prompt right after start never waits there for the warm-up's import
    prompt, deadline_ms = _parse_prompt(body)
    # Synchronous admission (Q4/Q8): a refusal raises here, before any byte of an acceptance is sent.
    accepted = daemon.submit_prompt(session_id, prompt, deadline_ms=deadline_ms)
    if not wait:
        return JSONResponse({"promptId": accepted.prompt_id, "lastEventId": accepted.event_id}, status_code=202)
    handle = accepted.handle

    async def cancel_on_disconnect() -> None:
        await wait_disconnected(request.receive)
        handle.cancel()  # the caller left: the prompt must not outlive its only waiter

    outcome: StopReason | Exception
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_on_disconnect)
        try:
            outcome = await handle.result()
        except Exception as exc:  # mapped below, outside the task group (no exception group)
            outcome = exc
        tg.cancel_scope.cancel()
    if isinstance(outcome, Exception):
        raise outcome
    return JSONResponse({"promptId": accepted.prompt_id, "stopReason": outcome})


async def cancel(request: Request) -> Response:
    """``POST /session/{id}/cancel`` → 204: the running prompt and every waiting one."""
    daemon_of(request).cancel_session(request.path_params["session_id"])
    return Response(status_code=204)


async def cancel_prompt(request: Request) -> Response:
    """``POST /session/{id}/prompt/{promptId}/cancel`` → 204: that one prompt."""
    daemon_of(request).cancel_prompt(request.path_params["session_id"], request.path_params["promptId"])
    return Response(status_code=204)


async def answer_permission(request: Request) -> Response:
    """``POST /session/{id}/permission/{requestId}`` → 204: answer a pending ``permission_request``."""
    option_id = required_str(await json_object(request, _ANSWER_FIELDS), "optionId")
    daemon_of(request).answer_permission(request.path_params["session_id"], request.path_params["requestId"], option_id)
    return Response(status_code=204)


async def events(request: Request) -> Response:
    """``GET /session/{id}/events``: the session's event stream, replayed from ``Last-Event-ID``."""
    daemon = daemon_of(request)
    session_id: str = request.path_params["session_id"]
    subscription = daemon.subscribe(session_id, last_event_id(request))
    return EventStreamResponse(subscription, session_id=session_id, heartbeat_s=daemon.options.heartbeat_s)
