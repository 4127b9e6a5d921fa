"""pygls, confined: the one module that imports it. pygls runs each request handler of a connection as an asyncio task
registered under its request id in its table of in-flight requests, and calls back when it ends; that is all it does.

What pygls does not do here, and why: it looks no method up (the dispatcher's method table is the only one, so
pygls' ``FeatureManager`` stays empty), it reshapes no message (a handler gets the params dict as decoded from the
wire; its ``acp.schema`` model is the one reshape: pygls' ``structure_message`` would go dict → attrs through a
cattrs converter first), and it writes nothing (it never gets a writer: every reply is built by the dispatcher). Its
public path (``handle_message``) does all three, and would answer an unexpected failure with a traceback
(``JsonRpcInternalError.of``) unless four private methods were overridden; entering one step further in needs none.

Private members used — none is overridden; each is pinned by ``tests/rpc/test_pygls_contract.py``:

- ``JsonRPCProtocol._execute_handler(msg_id, handler, callback, args)`` — called to start one request handler: pygls
  has no public way to run a handler without its own lookup and reshape.
- ``JsonRPCProtocol._request_futures`` — read and popped: the table of running handler tasks, by request id.

The tasks: pygls creates each with ``asyncio.ensure_future`` (a bare task the library forces). Their owner is
:class:`HandlerTasks`: a task is in its table from its start until its done-callback, and the dispatcher cancels and
awaits them through it (``Dispatcher.cancel_request``, ``Dispatcher.aclose``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from functools import partial
from typing import Any, cast

import cattrs
from pygls.protocol.json_rpc import JsonRPCProtocol
from pygls.server import JsonRPCServer

__all__ = ["HandlerTasks", "MsgId"]

MsgId = int | str
"""A JSON-RPC request id."""

Finished = Callable[[MsgId, "asyncio.Future[Any]"], None]
"""Called once a handler task is done (a result, an exception, or cancelled); it is out of the table by then."""


async def _run(handler: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """The one coroutine function pygls is given (it runs only coroutine functions as tasks)."""
    return await handler(*args)


class HandlerTasks:
    """The running request handlers of one connection, by request id: pygls' task runner and its table.

    Invariants: a task is in the table from :meth:`start` until just before ``finished`` runs for it; its first step
    runs one loop turn after :meth:`start` (it is queued at once, so a callback queued after it runs after that step).
    """

    def __init__(self) -> None:
        # A bare cattrs converter: pygls wants one, and never uses it here (nothing is structured or unstructured).
        server = JsonRPCServer(protocol_cls=JsonRPCProtocol, converter_factory=cattrs.Converter)
        self._protocol = server.protocol

    def start(self, msg_id: MsgId, finished: Finished, handler: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``handler(*args)`` as the task of request ``msg_id`` (not in flight already: the caller checks)."""
        # owner: this table (pygls makes the task with a bare ensure_future; it stays here until its done-callback)
        self._protocol._execute_handler(msg_id, _run, partial(self._finished, msg_id, finished), args=(handler, *args))

    def _finished(self, msg_id: MsgId, finished: Finished, future: Future[Any]) -> None:
        self._protocol._request_futures.pop(msg_id, None)
        finished(msg_id, cast("asyncio.Future[Any]", future))

    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self._protocol._request_futures

    def get(self, msg_id: MsgId) -> asyncio.Future[Any] | None:
        """The running task of request ``msg_id``, if any."""
        # Every handler started here is a coroutine, so pygls stores asyncio tasks (typed as concurrent futures).
        return cast("asyncio.Future[Any] | None", self._protocol._request_futures.get(msg_id))

    def running(self) -> list[asyncio.Future[Any]]:
        return [cast("asyncio.Future[Any]", task) for task in self._protocol._request_futures.values()]
