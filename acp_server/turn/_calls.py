"""One tool call of a turn, from the model's fragments to its record: announce, ask, run, report.

Invariants: every call the turn starts is announced once (``ToolCallStarted``, status pending) and ends with exactly
one final ``ToolCallUpdated`` (``completed`` or ``failed``), also when the prompt is cancelled mid-call (then before
the prompt answers); the model gets one ``tool`` message per call it made, whatever happened; a call that changes
something runs only when the mode, a session rule or the user allows it; a call that set the plan
(``update_plan``) is followed by one ``PlanUpdated`` carrying the whole plan, and its record keeps it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final, Literal

import anyio

from ..domain import (
    Emit,
    ImagePart,
    PlanEntry,
    PlanUpdated,
    TextContent,
    ToolCallRecord,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolKind,
)
from ..errors import RemoteError, ServerError
from ..modes import mode_named, needs_asking
from ..pipeline import ToolCallFragment
from ..tools import (
    MAX_ARGUMENTS_BYTES,
    PermissionChoice,
    PreparedCall,
    ToolCallError,
    ToolClient,
    ToolResult,
    arguments_json,
    cap_text,
    prepare_call,
)
from ..tools.builtin import BUILTIN
from ..tools.registry import ToolSet
from ._mode_watch import WITHDRAWN, ModeWatch, ask_while_offered
from ._side import SideAsk
from ._titles import failed_title

__all__ = ["CallAssembler", "PendingCall", "run_call"]

logger = logging.getLogger("acp_server.turn")

FINAL_UPDATE_TIMEOUT_S = 1.0
"""How long a cancelled call's final update may wait for the stream's reader (it never blocks the cancel)."""


MAX_CALLS_PER_ANSWER = 64
"""Tool calls one model answer may make; the ones past it are not run (the model is told)."""
MAX_NAME_CHARS = 128
"""Longer tool names are cut (no tool has such a name: the call fails as unknown either way)."""


@dataclass(slots=True)
class PendingCall:
    """A tool call as the model streamed it: id and name from its first fragment, arguments concatenated (kept only
    up to the arguments limit: past it, ``size`` keeps counting and the call fails without them)."""

    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    size: int = 0
    shown_id: str | None = None  # the id the call was announced with while it streamed (it keeps it)


@dataclass(frozen=True, slots=True)
class AssembledCall:
    """A call ready to run: ``problem`` set when it must fail without running (its arguments were too large)."""

    call_id: str
    name: str
    arguments: str
    problem: str | None = None


class CallAssembler:
    """Assembles streamed tool-call fragments by ``index``; :meth:`calls` in index order.

    Bounded whatever the model streams: at most :data:`MAX_CALLS_PER_ANSWER` calls are kept (the others are only
    counted), each with at most ``MAX_ARGUMENTS_BYTES`` of arguments and a name of at most :data:`MAX_NAME_CHARS`.
    """

    __slots__ = ("_calls", "_dropped")

    def __init__(self) -> None:
        self._calls: dict[int, PendingCall] = {}
        self._dropped: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self._calls)

    @property
    def dropped(self) -> int:
        """Calls the answer made past :data:`MAX_CALLS_PER_ANSWER` (not run)."""
        return len(self._dropped)

    def add(self, fragment: ToolCallFragment) -> None:
        call = self._calls.get(fragment.index)
        if call is None:
            if len(self._calls) >= MAX_CALLS_PER_ANSWER:
                self._dropped.add(fragment.index)
                return
            call = self._calls[fragment.index] = PendingCall(fragment.id or "", (fragment.name or "")[:MAX_NAME_CHARS])
        else:
            if fragment.id and not call.call_id:
                call.call_id = fragment.id
            if fragment.name and not call.name:
                call.name = fragment.name[:MAX_NAME_CHARS]
        if fragment.arguments:
            call.size += len(fragment.arguments)
            if call.size <= MAX_ARGUMENTS_BYTES:
                call.arguments.append(fragment.arguments)
            else:
                call.arguments.clear()

    def pending(self, index: int) -> PendingCall | None:
        """The call streaming at ``index`` (None: none, or one past :data:`MAX_CALLS_PER_ANSWER`)."""
        return self._calls.get(index)

    def claim_id(self, index: int, seen: set[str]) -> str:
        """The id of the call at ``index`` from now on, given out once (as :meth:`calls` would): for announcing it
        while it streams. ``seen`` gains it."""
        call = self._calls[index]
        if call.shown_id is None:
            call_id = call.call_id[:MAX_NAME_CHARS]
            call.shown_id = call_id if call_id and call_id not in seen else f"call_{uuid.uuid4().hex[:24]}"
            seen.add(call.shown_id)
        return call.shown_id

    def calls(self, seen: set[str]) -> list[AssembledCall]:
        """The calls in index order. A call without an id, or with one already ``seen`` in the session (or twice in
        this answer), gets a fresh one (an editor shows one card per id); ``seen`` gains every id given out. A call
        announced while it streamed keeps the id it was shown with (:meth:`claim_id`)."""
        out: list[AssembledCall] = []
        for index in sorted(self._calls):
            call_id = self.claim_id(index, seen)
            call = self._calls[index]
            if call.size > MAX_ARGUMENTS_BYTES:
                problem = f"arguments are too large (more than {MAX_ARGUMENTS_BYTES} bytes); they were not read"
                out.append(AssembledCall(call_id, call.name, "{}", problem))
            else:
                out.append(AssembledCall(call_id, call.name, "".join(call.arguments)))
        return out


def _without_lone_surrogates(value: object) -> object:
    """``value`` with every lone UTF-16 surrogate replaced by U+FFFD (what strict JSON readers accept)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.loads(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    return value


def _raw_input(arguments: str) -> object:
    """The arguments as a JSON value for display (``rawInput``); None when they are not JSON."""
    try:
        return _without_lone_surrogates(arguments_json(arguments)) if arguments else {}
    except (ValueError, RecursionError):
        return None


async def _final(emit: Emit, update: ToolCallUpdated) -> None:
    """Send a call's final update even while the prompt is being cancelled (bounded: a stuck reader can't hold it)."""
    with anyio.CancelScope(shield=True) as scope:
        scope.deadline = anyio.current_time() + FINAL_UPDATE_TIMEOUT_S
        await emit(update)


async def _end(emit: Emit, update: ToolCallUpdated, record: Callable[[], None]) -> None:
    """Send the final update of a call that ended, then ``record`` it. Cancelled while the update waits for the
    reader (so it was not taken), the update is still sent (:func:`_final`) and recorded: the call ends as it did,
    not as cancelled, and never without its final update."""
    try:
        await emit(update)
    except BaseException:
        await _final(emit, update)
        raise
    finally:
        record()


DECLINED = (
    "The user declined this {name} call, so it did not run. Do not retry it unchanged: continue without it, or "
    "explain what you wanted to do and ask the user how to proceed."
)
NO_ONE_TO_ASK = (
    "This {name} call needs the user's permission, and this client cannot be asked, so it did not run. Describe the "
    "change or command to the user instead (or they can switch the session to a mode that allows it)."
)
CANCELLED = "The user cancelled the prompt while this call was running; it was stopped."


async def _decision(
    prepared: PreparedCall,
    started: ToolCallStarted,
    *,
    mode: str,
    rules: dict[str, bool],
    client: ToolClient | None,
    watch: ModeWatch | None = None,
) -> str | None:
    """None when the call may run; else the message telling the model why it did not (``watch``: the session's
    mode, which withdraws the request when it stops offering the tool)."""
    kind: ToolKind = prepared.kind
    if not prepared.needs_permission:
        return None
    if watch is not None and not watch.offers(prepared.name):  # switched while it was prepared or announced
        return WITHDRAWN.format(name=prepared.name, mode=watch.mode)
    if not needs_asking(mode, kind, prepared.sandboxed):
        return None
    key = prepared.rule or kind
    rule = rules.get(key)
    if rule is not None:
        return None if rule else DECLINED.format(name=prepared.name)
    if client is None:
        return NO_ONE_TO_ASK.format(name=prepared.name)

    async def ask() -> PermissionChoice:
        try:
            return await client.permission.request_permission(started)
        except RemoteError as exc:
            logger.info("permission request for %s failed (%s): declined", started.call_id, exc)
            return "reject_once"

    if watch is None:
        choice: PermissionChoice | None = await ask()
    else:
        choice = await ask_while_offered(watch, prepared.name, ask)
        if choice is None:
            logger.info("permission request for %s withdrawn: the mode is now %s", started.call_id, watch.mode)
            return WITHDRAWN.format(name=prepared.name, mode=watch.mode)
    if choice == "allow_always":
        rules[key] = True
    elif choice == "reject_always":
        rules[key] = False
    return None if choice in ("allow_once", "allow_always") else DECLINED.format(name=prepared.name)


async def run_call(
    call_id: str,
    name: str,
    arguments: str,
    *,
    cwd: str,
    mode: str,
    offered: tuple[str, ...],
    additional: tuple[str, ...] = (),
    rules: dict[str, bool],
    client: ToolClient | None,
    emit: Emit,
    done: Callable[[ToolCallRecord], None],
    problem: str | None = None,
    tools: ToolSet | None = None,
    watch: ModeWatch | None = None,
    announced: bool = False,
    side: SideAsk | None = None,
) -> None:
    """Run one call to its end and hand its record to ``done`` (before re-raising a cancellation). ``problem``: why
    the call fails without running (found while it was assembled); ``tools``: the session's (None: the built-ins);
    ``announced``: the call was shown while it streamed (``_announce.py``), so what it is now known to be is an
    update of that, not a second announcement. ``side``: answers a call's question with the model (see
    :mod:`._side`; None: the question is left unanswered and the text returned)."""
    raw_input = None if problem is not None else _raw_input(arguments)
    try:
        if problem is not None:
            raise ToolCallError(problem)
        prepare = prepare_call if tools is None else tools.prepare
        prepared = await prepare(
            name,
            arguments,
            cwd=cwd,
            client=client,
            offered=offered,
            additional=additional,
            sandboxed=mode_named(mode).sandboxed,
        )
    except Exception as exc:  # unknown tool, bad arguments, a path outside the project... or a bug (logged)
        if not isinstance(exc, ServerError):
            logger.exception("a tool call could not be prepared")
        text = str(exc) if isinstance(exc, ServerError) else "internal error while reading the call (see the log)"
        message = (TextContent(text),)
        stored_name = name or "unknown_tool"
        known = BUILTIN if tools is None else tools
        title, kind = failed_title(name, known, exc), known.kind(name)  # the tool's own kind, what went wrong
        final = ToolCallUpdated(call_id, "failed", content=message)
        if announced:
            final = dataclasses.replace(final, title=title, kind=kind, raw_input=raw_input)
        else:
            await emit(ToolCallStarted(call_id, title, kind, raw_input, name=stored_name))
        output = f"Error: {text}"
        failed = ToolCallRecord(call_id, stored_name, arguments, output, "failed", title, kind, content=message)
        await _end(emit, final, partial(done, failed))
        return
    started = ToolCallStarted(
        call_id, prepared.title, prepared.kind, raw_input, prepared.locations, prepared.preview, name=name
    )
    record = _Recorder(call_id, name, arguments, prepared, done)
    if announced:  # what it is now known to be, as an update of what was shown while it streamed
        await emit(
            ToolCallUpdated(
                call_id,
                title=prepared.title,
                content=prepared.preview or None,
                locations=prepared.locations or None,
                kind=prepared.kind,
                raw_input=raw_input,
            )
        )
    else:
        await emit(started)
    try:
        refusal = await _decision(prepared, started, mode=mode, rules=rules, client=client, watch=watch)
        if refusal is not None:
            content: tuple[ToolContent, ...] = (TextContent(refusal),)
            await _end(
                emit,
                ToolCallUpdated(call_id, "failed", content=content),
                partial(record.end, refusal, "failed", content),
            )
            return
        await emit(ToolCallUpdated(call_id, "in_progress"))
        shown: list[ToolContent] = []

        async def show(content: tuple[ToolContent, ...]) -> None:
            shown[:] = content
            await emit(ToolCallUpdated(call_id, content=content))

        try:
            result = await prepared.run(show)
        except ServerError as exc:  # the tool failed, or the client answered its request with an error
            result = ToolResult(f"Error: {exc}", (TextContent(str(exc)),), failed=True)
        if result.question is not None and not result.failed:
            result = await _answered(result, result.question, side)
        final_content = (*shown, *result.content) if shown else result.content
        status: Final = "failed" if result.failed else "completed"
        await _end(
            emit,
            ToolCallUpdated(call_id, status, content=final_content, raw_output=result.raw_output),
            partial(record.end, result.output, status, final_content, result.raw_output, result.plan, result.images),
        )
        if result.plan is not None and not result.failed:  # the whole plan, after the call that set it
            await emit(PlanUpdated(result.plan))
    except BaseException as exc:
        if not record.ended:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            content = (TextContent("Cancelled" if cancelled else "Failed: internal error (see the agent's log)"),)
            await _final(emit, ToolCallUpdated(call_id, "failed", content=content))
            record.end(CANCELLED if cancelled else "Error: the tool failed unexpectedly.", "failed", content)
        raise


async def _answered(result: ToolResult, question: tuple[str, str], side: SideAsk | None) -> ToolResult:
    """``result`` with its question answered by the model after its output (no ``side``: the text instead)."""
    asked, text = question
    answer = text if side is None else await side(asked, text)
    output = cap_text(f"{result.output}\nQuestion: {asked}\n\n{answer}", "the rest was cut")
    return dataclasses.replace(result, output=output, question=None)


class _Recorder:
    """Builds a call's record once, as it ends."""

    __slots__ = ("_arguments", "_call_id", "_done", "_name", "_prepared", "ended")

    def __init__(
        self, call_id: str, name: str, arguments: str, prepared: PreparedCall, done: Callable[[ToolCallRecord], None]
    ) -> None:
        self._call_id, self._name, self._arguments = call_id, name, arguments
        self._prepared = prepared
        self._done = done
        self.ended = False

    def end(
        self,
        output: str,
        status: Literal["completed", "failed"],
        content: tuple[ToolContent, ...],
        raw_output: object = None,
        plan: tuple[PlanEntry, ...] | None = None,
        images: tuple[ImagePart, ...] = (),
    ) -> None:
        self.ended = True
        p = self._prepared
        self._done(
            ToolCallRecord(
                self._call_id,
                self._name,
                self._arguments,
                output,
                status,
                p.title,
                p.kind,
                p.locations,
                content,
                raw_output,
                plan,
                images,
            )
        )
