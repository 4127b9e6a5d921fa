"""The stdio agent: ACP over NDJSON on stdin/stdout, the face an editor spawns."""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import BinaryIO, TypeAlias

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..acp import AgentOptions, preload
from ..bridge import DEFAULT_COALESCE_BYTES, SessionBridge
from ..config import Settings
from ..provider import public_endpoint
from ..rpc import (
    SHUTDOWN_GRACE_S,
    Connection,
    Outbox,
    OversizedLine,
    RpcError,
    decode_line,
    iter_lines,
    open_stdio,
)
from ..store import open_store
from ..tasks import OwnedTaskGroup
from ..turn import ModelTurn
from ._endpoint import ConfigurationGate, agent_command

__all__ = ["ModelDiscovery", "StoreStartError", "describe_model", "open_bridge", "run_stdio"]

logger = logging.getLogger("acp_server")

OFFLINE_MODEL = "acp-server-offline"


class StoreStartError(Exception):
    """The ``--store`` database cannot be used at start: one line (its host and database, never its password) the
    command prints before it exits 1. SQLite's problems do not stop the server (they are reported per request)."""


class ModelDiscovery:
    """When the one ``GET /v1/models`` of the stack runs: :meth:`start` asks for it (idempotent, synchronous), and
    the stack's own task runs it, so it never outlives the model client it uses."""

    def __init__(self) -> None:
        self._wanted = anyio.Event()

    def start(self) -> None:
        self._wanted.set()

    async def run_when_started(self, turn: ModelTurn) -> None:
        await self._wanted.wait()
        await turn.discover_models()


@asynccontextmanager
async def open_bridge(
    settings: Settings,
    discovery: ModelDiscovery | None = None,
    *,
    modes: Collection[str] | None = None,
    gate: ConfigurationGate | None = None,
) -> AsyncIterator[SessionBridge]:
    """The model (the offline one when asked), the turn runner and the session bridge, closed in reverse order.

    ``modes``: the modes sessions may have (None: every mode the settings allow). Without ``--models`` the endpoint's
    model list is asked for in the background: at once, or when ``discovery`` is started (the stdio agent starts it
    once its first reply is written and the warm-up is done, so it never delays ``initialize`` or ``session/new``).
    """
    async with AsyncExitStack() as stack:
        # Entered first, so it closes last: in-flight turns can still record their cancelled answers; and a --store
        # that cannot be reached fails the start before anything else is started.
        store = await stack.enter_async_context(
            open_store(settings.state_dir, persist=not settings.no_persist, url=settings.store)
        )
        if settings.store is not None and store.persistent and store.problem is not None:
            raise StoreStartError(f"session store {store.location}: {store.problem.detail}")
        if settings.offline:
            from ..provider.offline import LoopbackModel

            loopback = await stack.enter_async_context(LoopbackModel())
            model = settings.model or OFFLINE_MODEL
            settings = replace(settings, base_url=loopback.base_url, api_key=None, model=model)
            loopback.listed_models = [{"id": model}]  # it answers any model name: it lists the one in use
        model_settings = settings.model_settings()
        logger.info(
            "%s",
            describe_model(
                model_settings.base_url, model_settings.api_key, model_settings.model, offline=settings.offline
            ),
        )
        turn = ModelTurn(model_settings)
        stack.push_async_callback(turn.aclose)
        if gate is not None:
            gate.attach(turn)  # an ``authenticate`` that finds a usable configuration hands it to this turn
        if not turn.models.final:
            owned = OwnedTaskGroup()
            tasks = await owned.enter()
            stack.push_async_exit(owned.exit)
            stack.callback(tasks.cancel_scope.cancel)  # runs first on the way out: the client closes after it
            if discovery is None:
                discovery = ModelDiscovery()
                discovery.start()
            tasks.start_soon(discovery.run_when_started, turn, name="model list")
        bridge = SessionBridge(
            turn,
            store=store,
            coalesce_bytes=DEFAULT_COALESCE_BYTES,  # a client slower than the model gets fewer, larger updates
            models=turn.models,
            **settings.bridge_arguments(modes),
        )
        yield await stack.enter_async_context(bridge)


def describe_model(base_url: str | None, api_key: str | None, model: str, *, offline: bool) -> str:
    """The one start-up line saying where prompts go: the endpoint (never a key) and model, or "offline"."""
    if offline:
        return f"model: offline (the built-in deterministic model at {public_endpoint(base_url)}, model {model!r})"
    if not (base_url or api_key):
        return "model: none configured; sessions answer auth_required until acp-server setup (or --base-url, --offline)"
    whose = " (the OpenAI API: an API key with no --base-url)" if base_url is None else ""
    return f"model: {model!r} at {public_endpoint(base_url)}{whose}"


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s: shutting down", signal.Signals(signum).name)
            stop.set()
            return


Receive = Callable[[], Awaitable[bytes]]
Send = Callable[[bytes], Awaitable[None]]


Line: TypeAlias = "bytes | OversizedLine"


async def _read_lines(
    receive: Receive, max_bytes: int, lines: MemoryObjectSendStream[Line], reading: anyio.CancelScope, stop: anyio.Event
) -> None:
    """Read stdin line by line into ``lines`` (where at most one waits) until EOF, a read error, or ``reading`` is
    cancelled; then set ``stop``. What was read is still dispatched: it was received."""
    with reading:
        async with lines:
            try:
                async for line in iter_lines(receive, max_bytes):
                    await lines.send(line)
                logger.info("stdin closed")
            except OSError as exc:
                logger.warning("stdin failed: %s", exc)
    stop.set()


async def _dispatch_lines(
    lines: MemoryObjectReceiveStream[Line], connection: Connection, outbox: Outbox, max_bytes: int, stop: anyio.Event
) -> None:
    """Dispatch each line in order; a bad line gets its error reply and never ends the loop.

    Each line waits while the outbox is over its high-water mark: a client that stops reading our answers stops
    being read (its writes block in the pipe), so what we buffer for it stays bounded. Once ``stop`` is set, a client
    that still does not read within :data:`SHUTDOWN_GRACE_S` is given up: the lines left could not be answered.
    """
    async with lines:
        async for line in lines:
            if not await _writable_or_given_up(outbox, stop):
                logger.warning("the client stopped reading its answers: the last lines it sent are not handled")
                return
            dispatcher = connection.dispatcher
            if isinstance(line, OversizedLine):
                dispatcher.refuse_oversized(line.size, max_bytes, line.head + b"\n" + line.tail)
                continue
            try:
                dispatcher.feed(decode_line(line))
            except RpcError as error:
                dispatcher.send_error(None, error)
            except Exception:
                logger.exception("unexpected failure while dispatching a message")
                dispatcher.send_error(None, RpcError(-32603, "Internal error", {"errorKind": "internal"}))


async def _writable_or_given_up(outbox: Outbox, stop: anyio.Event) -> bool:
    """Wait until the outbox is at or below its high-water mark; False when, ``stop`` being set, it still is not
    after the grace."""
    if outbox.writable:
        return True
    writable = False
    async with anyio.create_task_group() as tg:

        async def give_up() -> None:
            await stop.wait()
            await anyio.sleep(SHUTDOWN_GRACE_S)
            tg.cancel_scope.cancel()

        tg.start_soon(give_up)
        await outbox.wait_writable()
        writable = True  # it was, when the writer woke us (it may be over the mark again by now: that is fine)
        tg.cancel_scope.cancel()
    return writable


async def _pump(outbox: Outbox, send: Send, stop: anyio.Event) -> None:
    try:
        await outbox.pump(send)
    except OSError as exc:  # the client closed stdout
        logger.warning("stdout failed: %s", exc)
        outbox.close()
        stop.set()


def _preload_after_first_reply(send: Send, tg: TaskGroup, discovery: ModelDiscovery | None = None) -> Send:
    """``send``, which also starts warming the ACP schema and the model client in a worker thread once the first
    reply (``initialize``, normally) is written: the import must not delay that reply, and must be done by the
    time ``session/new`` needs the schema. The model list (``discovery``) is asked for once the warm-up is done, so
    its own work never competes with the schema's import that ``session/new`` waits for."""
    started = False

    async def warm_up() -> None:
        await anyio.to_thread.run_sync(preload, abandon_on_cancel=True)
        if discovery is not None:
            discovery.start()

    async def send_then_preload(data: bytes) -> None:
        nonlocal started
        await send(data)
        if not started:
            started = True
            tg.start_soon(warm_up)

    return send_then_preload


async def serve_connection(
    bridge: SessionBridge,
    receive: Receive,
    send: Send,
    settings: Settings,
    tg: TaskGroup,
    stop: anyio.Event,
    discovery: ModelDiscovery | None = None,
    options: AgentOptions | None = None,
) -> None:
    """Serve one ACP connection until its input ends or ``stop`` is set; answer what can be answered, then flush.

    Shutdown order: stop reading, dispatch the lines already read, then the connection's own order
    (:meth:`Connection.aclose`: cancel every prompt, wait for the handlers, each request answered once, flush the
    answers, bounded), and stop the writer.
    """
    outbox = Outbox()
    rpc = Connection(outbox, bridge, options or settings.agent_options())
    lines_in, lines_out = anyio.create_memory_object_stream[Line](1)
    reading = anyio.CancelScope()
    async with anyio.create_task_group() as connection:
        connection.start_soon(_pump, outbox, _preload_after_first_reply(send, tg, discovery), stop)
        connection.start_soon(_read_lines, receive, settings.line_limit(), lines_in, reading, stop)
        async with anyio.create_task_group() as dispatching:
            dispatching.start_soon(_dispatch_lines, lines_out, rpc, outbox, settings.line_limit(), stop)
            await stop.wait()
            reading.cancel()  # nothing more is read; what was read is dispatched (bounded by the grace)
        await rpc.aclose(grace_s=SHUTDOWN_GRACE_S)  # every prompt cancelled, each request answered once, flushed
        connection.cancel_scope.cancel()


async def run_stdio(
    settings: Settings,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    gate: ConfigurationGate | None = None,
) -> int:
    """Run the stdio agent; returns the process exit code (0 on EOF or SIGTERM). With ``gate``, sessions wait for a
    usable model endpoint (ACP's ``auth_required`` until then, see ``acp/_auth.py``)."""
    options = settings.agent_options()
    if gate is not None:
        options = replace(options, command=agent_command(), endpoint=gate, providers=gate)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, stop)
        discovery = ModelDiscovery()
        async with open_bridge(settings, discovery, gate=gate) as bridge, open_stdio(stdin, stdout) as io:
            await serve_connection(bridge, io.receive, io.send, settings, tg, stop, discovery, options)
        tg.cancel_scope.cancel()
    return 0
