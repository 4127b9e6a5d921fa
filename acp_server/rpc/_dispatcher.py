"""JSON-RPC dispatch: one method table per connection, every reply through the one error mapper, every outgoing
message handed whole (a dict, not bytes) to the connection's :class:`MessageSink`.

A message is looked up once, in this table, and reaches its handler with its params as decoded (the handler's
schema model is the one reshape). Request handlers run as tasks through pygls, confined to ``_pygls.py``
(:class:`HandlerTasks`: the task, its table of in-flight requests, the done-callback); notification handlers run
inline. Replies are built here: a result, the error of :func:`to_rpc_error` (never a traceback), or -32800.

Requests *to* the client (:meth:`Dispatcher.request`) keep a table of their own, keyed by ids of the form
``"acp-server:<n>"``: pygls' ``send_request`` would put their futures in the table of the client's in-flight requests,
so a client response carrying the id of one of its own requests would reach that handler's task (``Task.set_result``:
a crash), and it writes with no origin and no backpressure. Responses never reach pygls.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeGuard

from ..errors import InvalidInputError, RemoteError
from ._errors import RpcError, to_rpc_error
from ._framing import check_envelope, lone_surrogate_at
from ._pygls import HandlerTasks, MsgId

__all__ = ["Dispatcher", "MessageSink", "NotificationHandler", "RequestHandler", "RequestPeer", "is_response"]

logger = logging.getLogger("acp_server.rpc")

Message = dict[str, Any]


class MessageSink(Protocol):
    """Where a connection's outgoing messages go, in order; the transport encodes each one once."""

    def put(self, message: Message) -> None:
        """Queue a reply or an error (or a notification posted on behalf of no request); never waits (a reply is
        written from its handler task's done-callback)."""
        ...

    async def send(self, message: Message, origin: MsgId | None = None) -> None:
        """Queue a notification or a request sent by the handler of request ``origin`` (None: not on behalf of a
        request); waits while its destination is not reading (backpressure). Once the destination is closed a
        notification is dropped; a request raises :class:`~acp_server.errors.RemoteError` where the sink can tell
        (a routed channel), else it waits for :meth:`Dispatcher.aclose`, which ends the connection's requests."""
        ...


class RequestPeer:
    """What a handler gets of its connection, for the one message it handles (see ``acp_server.acp.Peer``)."""

    __slots__ = ("_dispatcher", "request_id")

    def __init__(self, dispatcher: Dispatcher, request_id: MsgId | None) -> None:
        self._dispatcher = dispatcher
        self.request_id = request_id

    def admitted(self) -> None:
        if self.request_id is not None and self._dispatcher.on_admitted is not None:
            self._dispatcher.on_admitted(self.request_id)

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        await self._dispatcher.notify(method, params, origin=self.request_id)

    def after_reply(self, method: str, params: Mapping[str, Any]) -> None:
        if self.request_id is not None:
            self._dispatcher.after_reply(self.request_id, method, params)

    async def request(
        self, method: str, params: Mapping[str, Any], on_late: Callable[[Any], None] | None = None
    ) -> Any:
        return await self._dispatcher.request(method, params, origin=self.request_id, on_late=on_late)

    def post_request(self, method: str, params: Mapping[str, Any]) -> None:
        self._dispatcher.post_request(method, params)

    def cancel_request(self, request_id: str | int) -> bool:
        return self._dispatcher.cancel_request(request_id)


RequestHandler = Callable[[Any, RequestPeer], Awaitable[Any]]
NotificationHandler = Callable[[Any, RequestPeer], None]


def is_response(message: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a decoded message is shaped as a response (an object with ``result``, ``error`` or ``id`` but no
    ``method``); a response is never answered, even when malformed (its id is in the other side's id space)."""
    return isinstance(message, dict) and "method" not in message and not message.keys().isdisjoint(_RESPONSE_KEYS)


_RESPONSE_KEYS = frozenset({"id", "result", "error"})

_ID_PREFIX = "acp-server:"
_LATE_KEPT = 64
"""Abandoned requests whose late answer is still awaited (each a dict entry), per connection."""
_OUR_ID = re.compile(r'"id"\s*:\s*"(' + re.escape(_ID_PREFIX) + r'\d+)"')
"""Our request ids are strings ``"acp-server:<n>"``: never confused with the client's, even in a shared log."""


class _Outgoing:
    """One request sent to the client and awaiting its response."""

    __slots__ = ("future", "method")

    def __init__(self, method: str, future: asyncio.Future[Message | RemoteError]) -> None:
        self.method = method
        self.future = future  # the checked response, or the error that ended the wait (connection closed)


class Dispatcher:
    """Routes parsed JSON-RPC messages of one connection to handlers; every outgoing message goes to ``sink``.

    Request handlers are coroutines (one task each, owned by the dispatcher through its :class:`HandlerTasks` and
    ended by :meth:`aclose`); notification handlers are synchronous by design (they run inline, in arrival order).
    ``on_admitted(request_id)`` runs when a handler reports that its request passed admission.

    Messages are handled in the order they arrive: a request's handler runs its first step (up to its first
    suspension: where a prompt is admitted) before any notification fed after it, so a ``session/cancel`` that follows
    a ``session/prompt`` in one read finds the prompt (a request handler's task takes its first step one loop turn
    later).

    Requests to the client (:meth:`request`): each waits in ``_outgoing`` until its response, its caller's
    cancellation, or :meth:`aclose`; whichever comes first removes it, and a response that finds nothing pending is
    logged and ignored (never answered).
    """

    def __init__(self, sink: MessageSink, on_admitted: Callable[[MsgId], None] | None = None) -> None:
        self.sink = sink
        self.on_admitted = on_admitted
        self._tasks = HandlerTasks()
        self._followers: dict[MsgId, list[Message]] = {}  # by request id: the notifications its result is followed by
        # The one method table, by kind: a name is in exactly one of the two.
        self._requests: dict[str, RequestHandler] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._outgoing: dict[str, _Outgoing] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._starting = 0  # request handlers scheduled that may not have taken their first step yet
        self._deferred = 0  # notifications waiting for the handlers scheduled before them
        self._late: dict[str, Callable[[Any], None]] = {}  # abandoned (or posted) requests: who takes a late result

    def register(
        self, requests: Mapping[str, RequestHandler], notifications: Mapping[str, NotificationHandler]
    ) -> None:
        """Add one handler per method; a name registered twice (of either kind) is an error, and adds nothing."""
        names = [*requests, *notifications]
        taken = sorted({name for name in names if name in self._requests or name in self._notifications})
        taken += sorted({name for name in names if names.count(name) > 1})
        if taken:
            raise ValueError(f"already registered: {', '.join(taken)}")
        self._requests.update(requests)
        self._notifications.update(notifications)

    def feed(self, message: Any) -> None:
        """Handle one decoded JSON value: a response ends the wait of its request; answer a malformed envelope,
        dispatch the rest."""
        if is_response(message):
            self._take_response(message)
            return
        checked, error, reply_id = check_envelope(message)
        if error is not None:
            self.send_error(reply_id, error)
            return
        assert checked is not None and "method" in checked  # an envelope without one is a response
        where = lone_surrogate_at(checked.get("params"))
        if where is not None:
            if "id" in checked:
                problem = "contains a lone UTF-16 surrogate (UTF-8 cannot carry it)"
                message = f"Invalid params for {checked['method']}: {where}: {problem}"
                invalid = InvalidInputError.for_field(where, problem, message)
                self.send_error(checked["id"], to_rpc_error(invalid))
            else:
                logger.debug("Ignoring %r: a lone UTF-16 surrogate at %s", checked["method"], where)
            return
        method = checked["method"]
        if "id" in checked:
            msg_id = checked["id"]
            refusal: RpcError | None = None
            if method in self._notifications:
                refusal = RpcError.invalid_request(f"{method} is a notification: send it without an id")
            elif method not in self._requests:
                refusal = RpcError.method_not_found(method)
            elif msg_id in self._tasks:  # a second task under one id would orphan the first: answer once each
                refusal = RpcError.invalid_request(f"request id {msg_id!r} is already in flight")
            if refusal is not None:
                self.send_error(msg_id, refusal)
                return
        elif method not in self._notifications:
            kind = "a request method" if method in self._requests else "unknown"
            logger.debug("Ignoring notification %r (%s)", method, kind)
            return
        self._handle_in_order(checked)

    def _handle_in_order(self, message: Message) -> None:
        """Handle a checked message after every request handler scheduled before it has taken its first step."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: nothing is scheduled, so nothing can be overtaken
            self._handle(message)
            return
        if "id" in message:
            self._handle(message)  # schedules the handler's task: its first step is queued
            self._starting += 1
            loop.call_soon(self._started)  # queued after that step: once it runs, the handler has started
            return
        if self._starting or self._deferred:
            self._deferred += 1
            loop.call_soon(self._handle_deferred, message)  # queued after the first steps of the handlers before
            return
        self._handle(message)

    def _started(self) -> None:
        self._starting -= 1

    def _handle_deferred(self, message: Message) -> None:
        self._deferred -= 1
        self._handle(message)

    def _handle(self, message: Message) -> None:
        """Start a request's handler task, or run a notification's handler (its failure is logged, never answered)."""
        method, params = message["method"], message.get("params")
        if "id" in message:
            msg_id = message["id"]
            self._tasks.start(msg_id, self._answer, self._requests[method], params, RequestPeer(self, msg_id))
            return
        try:
            self._notifications[method](params, RequestPeer(self, None))
        except Exception as exc:
            to_rpc_error(exc)  # logs unexpected failures; a notification has no reply

    def _answer(self, msg_id: MsgId, task: asyncio.Future[Any]) -> None:
        """A request's one answer, once its handler task is done: its result (then the notifications that follow it),
        the mapped error, or -32800 when it was cancelled."""
        followers = self._followers.pop(msg_id, ())
        if task.cancelled():
            self.send_error(msg_id, RpcError.request_cancelled())
        elif (exc := task.exception()) is not None:
            self.send_error(msg_id, to_rpc_error(exc))
        else:
            self.sink.put({"jsonrpc": "2.0", "id": msg_id, "result": task.result()})
            for message in followers:
                self.sink.put(message)

    def _take_response(self, message: dict[str, Any]) -> None:
        """Hand a response to the request awaiting it; anything else (malformed, unknown id) is logged, never
        answered."""
        checked, invalid, _ = check_envelope(message)
        if invalid is not None:
            logger.warning("Ignoring a malformed response (id %.80r): %s", message.get("id"), invalid.message)
            msg_id = message.get("id")
            outgoing = self._outgoing.pop(msg_id, None) if isinstance(msg_id, str) else None
            if outgoing is not None and not outgoing.future.done():  # its request must not wait for ever
                problem = f"{outgoing.method} failed: the client's response is malformed ({invalid.message})"
                outgoing.future.set_result(RemoteError(problem))
            return
        assert checked is not None
        msg_id = checked["id"]
        if msg_id is None:
            if "error" in checked:  # the client could not read one of our messages
                logger.warning("Peer reported an error: %.500r", checked["error"])
            else:
                logger.warning("Ignoring a malformed response: a result with a null id")
            return
        late = self._late.pop(msg_id, None) if isinstance(msg_id, str) else None
        if late is not None:
            if "result" in checked:
                late(checked["result"])
            return
        outgoing = self._outgoing.pop(msg_id, None) if isinstance(msg_id, str) else None
        if outgoing is None or outgoing.future.done():
            logger.debug("Ignoring a response to no pending request (id %.80r)", msg_id)
            return
        outgoing.future.set_result(checked)

    def refuse_oversized(self, size: int, limit: int, edges: bytes = b"") -> None:
        """A message too large to read: answer -32600 (``id`` null), and fail the request to the client it answers,
        when one of ours is named in its first or last bytes (``edges``): it must not wait for ever."""
        self.send_error(None, RpcError.invalid_request(f"message of {size} bytes exceeds the {limit}-byte limit"))
        for match in _OUR_ID.finditer(edges.decode("utf-8", "replace")):
            outgoing = self._outgoing.pop(match.group(1), None)
            if outgoing is not None and not outgoing.future.done():
                problem = f"the client's response ({size} bytes) exceeds the {limit}-byte limit"
                outgoing.future.set_result(RemoteError(f"{outgoing.method} failed: {problem}"))

    def send_error(self, msg_id: Any, error: RpcError) -> None:
        """Write an error reply (``msg_id`` None gives ``"id": null``)."""
        self.sink.put({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()})

    async def notify(self, method: str, params: Mapping[str, Any], origin: MsgId | None = None) -> None:
        """Send a notification, in order with everything else; waits while the sink is full. ``origin``: the request
        whose handler sends it (transports that route per request use it)."""
        await self.sink.send({"jsonrpc": "2.0", "method": method, "params": params}, origin)

    def after_reply(self, msg_id: MsgId, method: str, params: Mapping[str, Any]) -> None:
        """Queue a notification to be written right after the result of request ``msg_id`` (never waits, like
        the reply; dropped when the request answers an error or is cancelled)."""
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        self._followers.setdefault(msg_id, []).append(message)

    def post(self, method: str, params: Mapping[str, Any]) -> None:
        """Queue a notification at once, on behalf of no request (never waits, like a reply): news from elsewhere,
        in order with everything queued before it."""
        self.sink.put({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        origin: MsgId | None = None,
        on_late: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send a request to the client, in order with the notifications of the same handler (``origin``: the request
        whose handler sends it; backpressure as for :meth:`notify`), and return the ``result`` of its response.

        Raises :class:`~acp_server.errors.RemoteError`: ``code`` and ``data`` of an error response, its message
        prefixed with ``method``; ``code`` None when the connection closed (or was closed) before the response.
        Cancelling the caller forgets the request at once: a result arriving later goes to ``on_late`` when given
        (at most :data:`_LATE_KEPT` are awaited so; the connection's end forgets them), else it is ignored.
        """
        if self._closed:
            raise RemoteError(f"connection closed: {method} was not sent")
        msg_id = f"{_ID_PREFIX}{next(self._ids)}"
        future: asyncio.Future[Message | RemoteError] = asyncio.get_running_loop().create_future()
        self._outgoing[msg_id] = _Outgoing(method, future)
        sent = False
        try:
            await self.sink.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}, origin)
            sent = True
            outcome = await future
        except BaseException:  # the caller gave up (cancelled): an answer that comes goes to on_late
            if sent and on_late is not None:
                if not future.done() or future.cancelled():
                    self._await_late(msg_id, on_late)
                elif isinstance(answer := future.result(), dict) and "result" in answer:
                    on_late(answer["result"])  # it came as the caller was cancelled
            raise
        finally:
            self._outgoing.pop(msg_id, None)
        if isinstance(outcome, RemoteError):
            raise outcome
        if "error" in outcome:
            error = outcome["error"]
            raise RemoteError(f"{method} failed: {error['message']}", error["code"], error.get("data"))
        return outcome["result"]

    def _await_late(self, msg_id: str, on_late: Callable[[Any], None]) -> None:
        """Hand the result of an abandoned request, if one comes, to ``on_late``; the oldest such wait goes first."""
        if len(self._late) >= _LATE_KEPT:
            oldest = next(iter(self._late))
            logger.warning("no longer waiting for the answer to %s: %d abandoned requests wait", oldest, _LATE_KEPT)
            del self._late[oldest]
        self._late[msg_id] = on_late

    def post_request(self, method: str, params: Mapping[str, Any]) -> None:
        """Queue a request at once (never waits, like a reply) whose answer nobody waits for: it is read and
        dropped quietly. For clean-ups sent from callbacks; nothing is sent once the connection is closed."""
        if self._closed:
            return
        msg_id = f"{_ID_PREFIX}{next(self._ids)}"
        self._await_late(msg_id, lambda result: None)
        self.sink.put({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def _fail_outgoing(self) -> None:
        """End the wait of every request sent to the client: no response can come any more."""
        self._late.clear()
        outgoing, self._outgoing = self._outgoing, {}
        for entry in outgoing.values():
            if not entry.future.done():
                entry.future.set_result(RemoteError(f"connection closed before the client answered {entry.method}"))

    def cancel_request(self, msg_id: MsgId) -> bool:
        """Cancel a running request handler; it answers -32800. False when no such request is in flight."""
        task = self._tasks.get(msg_id)
        return bool(task is not None and task.cancel())

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Fail every request awaiting the client (and refuse new ones), wait up to ``grace_s`` for in-flight requests
        to answer, then cancel the rest and let them answer -32800."""
        self._closed = True
        self._fail_outgoing()
        pending = self._tasks.running()
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            for future in still:
                future.cancel()
            if still:
                await asyncio.wait(still, timeout=grace_s)
        await asyncio.sleep(0)  # let done-callbacks write their replies
