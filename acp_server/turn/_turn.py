"""A model turn: the session's conversation plus a prompt become streamed chat requests, with tool calls run in
between, until the model answers without calling a tool."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..domain import (
    Conversation,
    Emit,
    Message,
    ModelStep,
    Outcome,
    Prompt,
    StopReason,
    TextChunk,
    ThoughtChunk,
    ToolCallRecord,
    UsageReported,
)
from ..pipeline import (
    ChatRequest,
    Delta,
    Finished,
    ModelHTTPError,
    RequestEncoder,
    RetryEvent,
    StreamPolicy,
    run_chat,
)
from ..system_prompts import ClientPrompt
from ..tools import ToolClient
from ..tools.builtin import BUILTIN
from ..tools.registry import ToolSet
from ._announce import CallAnnouncer
from ._answer import Answer
from ._batch import run_in_batches
from ._calls import AssembledCall, CallAssembler, run_call
from ._clients import ClientSlot
from ._compaction import CompactOutcome, TurnContext, summary_text
from ._exceptions import ContextWindowTooSmallError, ModelNotConfiguredError
from ._in_flight import InFlight
from ._links import with_linked_files
from ._mode_watch import ModeWatch
from ._models import ModelCatalog
from ._notices import instructions_cut, retry_notice, server_notices
from ._request_fields import RequestFields, answer_bound
from ._side import side_answer
from ._subagent import SubagentSettings, bounded_turn, subagent_client
from ._system_prompt import DEFAULT_SYSTEM_PROMPT, build_system_prompt
from ._usage import usage_of
from ._window_fit import window_problem
from .context import DEFAULT_COMPACT_THRESHOLD, Budget, ContextView, json_tokens, step_messages, user_content

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "DEFAULT_MAX_TURN_REQUESTS",
    "DEFAULT_MODEL",
    "MODEL_LIST_TIMEOUT_S",
    "ModelSettings",
    "ModelTurn",
    "SessionLike",
    "offered_tools",
    "usage_of",
]

logger = logging.getLogger("acp_server.turn")

DEFAULT_MODEL = "gpt-4o-mini"
"""The model a turn asks for when none is configured (no ``--model``, no ``--models``)."""

DEFAULT_MAX_TURN_REQUESTS = 50
"""Model requests one prompt may make (each tool-calling answer is one); past it the prompt ends
``max_turn_requests``."""

_STOP_REASONS: dict[str | None, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_calls": "end_turn",
}
"""Finish reasons as stop reasons; any other reason the model gives ends the turn normally (``end_turn``)."""

MODEL_LIST_TIMEOUT_S = 3.0
"""How long the one ``GET /v1/models`` of :meth:`ModelTurn.discover_models` may take in all."""


class SessionLike(Protocol):
    """What a turn needs of a session: where it works, its mode, model and "always" rules, and the journal of its
    history. ``model`` None: the server's default model.

    ``begin_turn`` records the prompt and returns the history before it (what the model gets); ``record_steps``
    records the tool steps so far (any number of times); ``end_turn`` records the answer. ``begin_turn`` and
    ``end_turn`` are called once per turn, in that order, by the turn that holds the session's FIFO. A session
    may also have ``tools`` (a :class:`ToolSet`: its MCP servers' tools beside the built-ins; see :func:`tools_of`).
    """

    @property
    def cwd(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def permission_rules(self) -> dict[str, bool]: ...

    @property
    def conversation(self) -> Conversation: ...

    async def begin_turn(self, prompt: Prompt, user: Message, /) -> Conversation: ...

    async def record_steps(self, steps: tuple[ModelStep, ...], /) -> None: ...

    async def end_turn(self, answer: Message, /) -> None: ...

    async def mode_switched(self) -> None:
        """Return at the session's next change of mode."""
        ...


@dataclass(frozen=True)
class ModelSettings:
    """Where the model is and how its streams are guarded. ``api_key`` is a secret: never logged.

    ``model`` is the default model; ``models`` the others a session may pick (empty: ask the endpoint's
    ``GET /v1/models``, see :meth:`ModelTurn.discover_models`); ``context_window`` the window every model is
    reported with (None: the endpoint's or the family's, else unknown). ``system_prompt``: how the model is asked
    to work, followed in each turn by the environment and (``project_instructions``) the project's instruction files;
    ``compact_threshold`` the percent of the window a request may fill before the conversation is compacted (0:
    only when the endpoint refuses one); ``max_answer_tokens`` the answer's bound each request carries (None: the
    window's answer room when the window is known, see :func:`answer_bound`; 0: none).
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str = DEFAULT_MODEL
    models: tuple[str, ...] = ()
    context_window: int | None = None
    model_list_timeout_s: float = MODEL_LIST_TIMEOUT_S
    policy: StreamPolicy = field(default_factory=StreamPolicy)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    project_instructions: bool = True
    max_turn_requests: int = DEFAULT_MAX_TURN_REQUESTS
    compact_threshold: int = DEFAULT_COMPACT_THRESHOLD
    max_answer_tokens: int | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # sent with each request: secrets
    subagents: SubagentSettings = field(default_factory=SubagentSettings)

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)


def offered_tools(mode: str) -> tuple[str, ...]:
    """The built-in tools the model is offered in ``mode`` (an unknown mode offers the read-only ones: fail safe)."""
    return BUILTIN.offered(mode)


def additional_of(session: SessionLike) -> tuple[str, ...]:
    """The session's additional directories (ACP ``additionalDirectories``): further roots its tools may use, after
    its cwd; none when the session has no ``additional_directories``."""
    additional = getattr(session, "additional_directories", ())
    return tuple(additional) if isinstance(additional, tuple | list) else ()


def tools_of(session: SessionLike) -> ToolSet:
    """The session's tools: its ``tools`` set when it has one (built-ins plus its MCP servers'), else the
    built-ins (a fresh copy: what one session's prompt finds never changes the shared set)."""
    tools = getattr(session, "tools", None)
    return tools if isinstance(tools, ToolSet) else BUILTIN.copy()


class ModelTurn:
    """Runs turns against one OpenAI-compatible endpoint; the HTTP client is created on first use and reused.

    ``models`` is the catalog sessions pick from (the default model alone until :meth:`discover_models` or
    ``settings.models`` fills it). Each request asks for usage (``stream_options.include_usage``) until the endpoint
    refuses that field once: then it is asked again without it, and never again by this runner.
    """

    def __init__(self, settings: ModelSettings) -> None:
        if settings.max_turn_requests < 1:
            raise ValueError("max_turn_requests must be >= 1")
        self.settings = settings
        self.models = ModelCatalog(settings.model, settings.models, context_window=settings.context_window)
        self._clients = ClientSlot()
        self._fields = RequestFields()
        self._in_flight = InFlight()

    def _get_client(self) -> AsyncOpenAI:
        if not self.settings.configured:
            raise ModelNotConfiguredError()
        if self._clients.current is None:
            from ..provider import make_openai_client

            base_url, api_key, headers = self.settings.base_url, self.settings.api_key, dict(self.settings.headers)
            self._clients.current = make_openai_client(base_url=base_url, api_key=api_key, headers=headers)
        return self._clients.current

    async def _client_ready(self) -> AsyncOpenAI:
        """:meth:`_get_client`, its first call after importing the client's modules in a worker thread: the event
        loop never waits on that import, nor on a warm-up thread importing the same modules (which holds their
        import lock) — so prompts sent meanwhile are admitted or refused at once."""
        if self._clients.current is None and self.settings.configured:
            from ..provider import import_client_modules

            await anyio.to_thread.run_sync(import_client_modules, abandon_on_cancel=True)
        return self._get_client()

    async def reconfigure(self, settings: ModelSettings) -> None:
        """Point this runner at another endpoint (the stdio agent's ``authenticate``, an editor's ``providers/set``):
        new settings for the next turns (a running one ends on its client, see :class:`ClientSlot`), the catalog
        reset in place (the bridge shares it), the model list asked."""
        await self._clients.retire()
        self.settings = settings
        self.models.reset(settings.model, settings.models, context_window=settings.context_window)
        await self.discover_models()

    async def discover_models(self) -> None:
        """Fill the catalog from the endpoint's ``GET /v1/models``, once, within ``model_list_timeout_s``; any
        failure (none configured, an error, a timeout) leaves the default model alone, logged. Never raises but
        for cancellation. A configured ``--models`` list is never replaced.

        The request waits until no chat request of this runner is in flight (llama-cpp-python's server interrupts
        the stream it is sending when another request comes: the first prompt's answer would be cut)."""
        catalog = self.models
        if catalog.final:
            return
        if not self.settings.configured:
            catalog.give_up()
            return
        timeout = self.settings.model_list_timeout_s
        try:
            client = (await self._client_ready()).with_options(timeout=timeout, max_retries=0)
            await self._in_flight.wait_none()  # never alongside a chat request: some servers would cut its stream
            entries: list[dict[str, Any]] = []
            with anyio.fail_after(timeout):
                async for entry in client.models.list():
                    entries.append(entry.model_dump())
        except Exception as exc:
            catalog.give_up()
            reason = "no answer in time" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            logger.info("models: GET /v1/models failed (%s); sessions are offered %r only", reason, catalog.default)
            return
        catalog.learn(entries)
        shown = ", ".join(catalog.available[:8]) + (" ..." if len(catalog.available) > 8 else "")
        logger.info("models: %d offered (from GET /v1/models): %s", len(catalog.available), shown)

    async def _request(
        self,
        client: AsyncOpenAI,
        model: str,
        messages: list[dict[str, Any]],
        offered: tuple[str, ...],
        on_delta: Callable[[Delta], Awaitable[None]],
        encoder: RequestEncoder | None = None,
        tools: ToolSet = BUILTIN,
        emit: Emit | None = None,
        bound: int | None = None,
    ) -> Finished:
        """One streamed request; a refusal of an optional field (usage, the answer's ``bound``) retries it without
        (:class:`RequestFields`). ``encoder``: the turn's, so each request encodes only the messages added since the
        previous one; ``emit``: where each retry wait is announced (:func:`retry_notice`)."""
        extra = self._fields.extra(tools.entries(offered), bound)
        policy = self.settings.policy

        async def on_retry(event: RetryEvent) -> None:
            if emit is not None:
                await emit(retry_notice(event, policy))

        while True:
            try:
                return await run_chat(client, ChatRequest(model, messages, extra, encoder), policy, on_delta, on_retry)
            except ModelHTTPError as exc:
                if not self._fields.without_refused(exc, extra):
                    raise

    async def _context(self, session: SessionLike, history: Conversation, content: Any, emit: Emit) -> TurnContext:
        """The turn's view of ``history`` (under this turn's system prompt) and its budget keeper."""
        settings = self.settings
        view = ContextView(await self._system(session), history, content)
        ask = partial(summary_text, self._get_client(), policy=settings.policy)
        threshold = settings.compact_threshold
        return TurnContext(view, catalog=self.models, threshold=threshold, session=session, emit=emit, ask=ask)

    async def _system(self, session: SessionLike) -> str:
        """The agent's prompt, its how-to-work text replaced (``override``) or followed (``append``) by the
        client's own system prompt when the session has one."""
        base, cwd, instructions = self.settings.system_prompt, session.cwd, self.settings.project_instructions
        client: ClientPrompt | None = getattr(session, "system_prompt", None)
        base, after = (base, "") if client is None else client.combine(base)
        additional, tools = additional_of(session), tools_of(session)
        system = await build_system_prompt(base, cwd, instructions, additional=additional, tools=tools)
        return f"{system}\n\n{after.strip()}" if after.strip() else system

    def _window_problem(self, session: SessionLike, system: str, budget: Budget) -> ContextWindowTooSmallError | None:
        return window_problem(system, self.settings.system_prompt, tools_of(session), session.mode, budget)

    async def window_problem(self, session: SessionLike) -> ContextWindowTooSmallError | None:
        """Why no prompt of ``session`` can work with its model's window (what takes the room, what would help),
        None when one can or the window is unknown: what a new session is told at once."""
        model = self.models.resolve(session.model)
        budget = Budget(self.models.budget_window(model), self.settings.compact_threshold)
        return None if budget.window is None else self._window_problem(session, await self._system(session), budget)

    async def compact(self, session: SessionLike, emit: Emit, instructions: str = "") -> CompactOutcome:
        """Compact the session's conversation now (``/compact``, its ``instructions`` to the summary request): every
        stored turn is summarised into its compaction record; nothing is added to the conversation. The caller holds
        the session's FIFO slot. In flight throughout: the model list is never asked for meanwhile. The outcome's
        ``text`` is what the user is answered when nothing was compacted. Raises :class:`ContextWindowTooSmallError`
        when the window cannot hold any prompt."""
        with self._in_flight:
            return await self._compact(session, emit, instructions)

    async def _compact(self, session: SessionLike, emit: Emit, instructions: str) -> CompactOutcome:
        await self._client_ready()  # the summary request's client, its modules imported off the event loop
        history = session.conversation
        context = await self._context(session, Conversation(list(history.messages), history.compaction), "", emit)
        model = self.models.resolve(session.model)
        problem = self._window_problem(session, context.view.system, context.budget(model))
        if problem is not None:
            raise problem
        tools = tools_of(session)
        return await context.compact(model, json_tokens(tools.entries(tools.offered(session.mode))), instructions)

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def __call__(
        self, session: SessionLike, prompt: Prompt, emit: Emit, client: ToolClient | None = None
    ) -> StopReason:
        """Answer the prompt: stream, run the tool calls asked for, ask again, until an answer without calls (or
        ``max_turn_requests`` requests). The session's journal gains the prompt before the model is asked, each tool
        step as its calls end, and the answer when the turn ends, marked with its outcome (``complete``,
        ``failed``, ``cancelled``). The answer is recorded even when the turn is cancelled (shielded); a failure to
        record it is raised only when the turn itself succeeded, so it never hides the turn's own error or cancel.

        ``emit`` is the prompt's event stream: awaiting it is the reader's backpressure. Each request's deltas are
        handled inside the pipeline's per-attempt lifetime scope (:func:`run_chat`), so a reader that stops reading
        cannot hold a model request open past ``--stream-max-lifetime-ms``. Tool calls run between requests, each
        under its own bounds (a command's timeout; a permission wait ends with the prompt's cancel or deadline);
        a ``task`` call runs a child turn (``_subagent``)."""
        # In flight from its start until its first request has its answer: the model list (discover_models) never
        # goes to the server while the turn prepares that request (the client's import, the system prompt's git).
        client = subagent_client(partial(bounded_turn, self), self.settings.subagents, session, client)
        release_start = self._in_flight.hold()
        try:
            return await self._answer(session, prompt, emit, client, release_start)
        finally:
            release_start()

    async def _answer(
        self, session: SessionLike, prompt: Prompt, emit: Emit, client: ToolClient | None, started: Callable[[], None]
    ) -> StopReason:
        """:meth:`__call__`'s turn; ``started`` is called once its first request has its answer."""
        model_client = await self._client_ready()
        # Once per turn: the prompt with its linked files read; what the model gets, and its text, what is stored.
        read = await with_linked_files(prompt, session.cwd, additional_of(session))
        content = user_content(read)
        user = Message("user", read.text)
        history = await session.begin_turn(prompt, user)
        answer = Answer(len(history.messages) + 2)  # the store numbers from 1: the prompt, then this answer
        settings = self.settings
        seen = {c.call_id for m in history.messages for step in m.steps for c in step.calls}  # ids in the session

        announcer = CallAnnouncer(emit, session.cwd, seen, tools_of(session), additional_of(session))

        async def on_delta(delta: Delta) -> None:
            if delta.tool_calls:
                for fragment in delta.tool_calls:
                    calls.add(fragment)
                await announcer.fragments(calls, delta.tool_calls)  # shown while they stream
            if delta.reasoning:
                answer.reasoning.append(delta.reasoning)
                await emit(ThoughtChunk(delta.reasoning, message_id=answer.thought_id))
            if delta.text:
                answer.text.append(delta.text)
                await emit(TextChunk(delta.text, message_id=answer.text_id))

        try:
            fallen = await tools_of(session).prepare_prompt()  # a session's dead MCP servers reconnect, once per prompt
            for notice in server_notices(fallen):
                await emit(notice)
            if not history.messages and settings.project_instructions:  # a session's first prompt: told once
                told = await instructions_cut(session.cwd)
                if told is not None:
                    await emit(told)
            context = answer.context = await self._context(session, history, content, emit)
            model = self.models.resolve(session.model)
            problem = self._window_problem(session, context.view.system, context.budget(model))
            if problem is not None:  # no prompt can work: said at once, nothing sent, no compaction tried
                raise problem
            messages = context.view.messages()
            encoder = RequestEncoder()  # the loop appends to ``messages`` (a compaction rebuilds them)
            requests = 0
            while True:
                requests += 1
                tools = tools_of(session)  # read per request: a server's re-listed tools apply to the next one
                offered = tools.offered(session.mode)
                model = self.models.resolve(session.model)  # read per request: a switch applies to the next one
                calls = CallAssembler()
                send = partial(
                    self._request,
                    model_client,
                    model,
                    offered=offered,
                    on_delta=on_delta,
                    encoder=encoder,
                    tools=tools,
                    emit=emit,
                    bound=answer_bound(settings.max_answer_tokens, context.budget(model)),
                )
                tool_tokens = json_tokens(tools.entries(offered))
                with self._in_flight:  # a summary request of the context's too
                    messages, finished = await context.send(messages, answer.steps, model, tool_tokens, send)
                started()
                usage = usage_of(finished)
                if usage is not None:
                    await emit(UsageReported(*usage, size=self.models.context_window(model)))
                if not calls:
                    stop_reason = _STOP_REASONS.get(finished.finish_reason, "end_turn")
                    break
                answer.calls = ended = list[ToolCallRecord]()

                async def run_one(
                    call: AssembledCall,
                    done: Callable[[ToolCallRecord], None],
                    tools: ToolSet = tools,
                    offered: tuple[str, ...] = offered,
                    model: str = model,
                ) -> None:
                    mode = session.mode  # read per call: a switch mid-step applies from the next call
                    await run_call(
                        call.call_id,
                        call.name,
                        call.arguments,
                        cwd=session.cwd,
                        additional=additional_of(session),
                        mode=mode,
                        offered=tools.still_offered(offered, mode),
                        rules=session.permission_rules,
                        client=client,
                        emit=emit,
                        done=done,
                        problem=call.problem,
                        tools=tools,
                        watch=ModeWatch(session, tools.offered),  # a switch withdraws a pending request
                        announced=announcer.take(call.call_id),
                        side=partial(side_answer, model_client, model, settings.policy),
                    )

                async def record() -> None:
                    await session.record_steps(tuple(s.without_images() for s in (*answer.steps, answer.step())))

                limit = settings.subagents.concurrency
                await run_in_batches(calls.calls(seen), run_one, limit=limit, done=ended.append, after=record)
                if calls.dropped and ended:
                    note = f"\n\n(This answer asked for {len(ended) + calls.dropped} tool calls; only the first "
                    note += f"{len(ended)} ran. Ask for fewer at a time.)"
                    ended[-1] = dataclasses.replace(ended[-1], output=ended[-1].output + note)
                step = answer.step()
                answer.steps.append(step)
                messages = [*messages, *step_messages(step)]
                answer.next_request()
                announcer.next_request()
                if requests >= settings.max_turn_requests:
                    stop_reason = "max_turn_requests"
                    break
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            outcome: Outcome = "cancelled" if cancelled else "failed"
            cut = answer.message("cancelled" if cancelled else None, outcome)
            await announcer.abandon(cancelled)  # calls shown while streaming that never ran end failed
            with anyio.CancelScope(shield=True):
                try:
                    await session.end_turn(cut)
                except Exception:
                    logger.exception("could not record the %s answer of a turn", outcome)
            raise
        with anyio.CancelScope(shield=True):
            await session.end_turn(answer.message(stop_reason, "complete"))
        return stop_reason
