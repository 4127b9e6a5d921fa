"""The pygls behaviour ``acp_server.rpc._pygls`` relies on, pinned against the installed pygls itself.

The adapter calls one private method of :class:`pygls.protocol.json_rpc.JsonRPCProtocol`, ``_execute_handler``, and
reads and pops its ``_request_futures``; it overrides nothing. The first sections drive a bare pygls protocol and fail
if pygls stops running a coroutine handler as a task registered under its id, in the caller's context, with the
callback we give. Then the adapter itself, and the reasons it enters pygls one step below its public path (that path
reshapes, looks methods up in its own table, and answers with tracebacks) — and why responses never reach pygls.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from concurrent.futures import Future
from typing import Any

import pytest
from pygls.protocol import default_converter
from pygls.protocol.json_rpc import JsonRPCProtocol, JsonRPCRequestMessage, MsgId
from pygls.server import JsonRPCServer

from acp_server.rpc._pygls import HandlerTasks

pytestmark = pytest.mark.anyio


class Recorder(JsonRPCProtocol):
    """A bare pygls protocol that records what it would write (the adapter never gives it a writer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[Any] = []
        self.wrote = asyncio.Event()

    def _send_data(self, data: Any) -> None:
        self.sent.append(data)
        self.wrote.set()


def make_protocol() -> Recorder:
    protocol = JsonRPCServer(protocol_cls=Recorder, converter_factory=default_converter).protocol
    assert type(protocol) is Recorder  # JsonRPCServer instantiates exactly the protocol class it is given
    return protocol


class Callbacks:
    def __init__(self) -> None:
        self.done: list[Future[Any]] = []
        self.event = asyncio.Event()

    def __call__(self, future: Future[Any]) -> None:
        self.done.append(future)
        self.event.set()

    async def wait(self) -> Future[Any]:
        async with asyncio.timeout(5):
            await self.event.wait()
        return self.done[-1]


# -- the members the adapter uses exist with its signature ---------------------------------------------------------


def test_execute_handler_takes_the_id_the_handler_the_callback_and_positional_args() -> None:
    parameters = inspect.signature(JsonRPCProtocol._execute_handler).parameters
    assert list(parameters) == ["self", "msg_id", "handler", "callback", "args", "kwargs"]


def test_the_protocol_starts_with_an_empty_request_table_and_feature_table() -> None:
    protocol = make_protocol()
    assert protocol._request_futures == {}
    assert protocol.fm.features == {}


# -- _execute_handler: a coroutine function runs as a task, in the table under its id, our callback at its end ----


async def test_a_coroutine_handler_runs_as_a_task_registered_under_its_id_with_our_args_and_callback() -> None:
    protocol = make_protocol()
    callback = Callbacks()
    seen: dict[str, Any] = {}

    async def handler(*args: Any) -> Any:
        seen["args"] = args
        seen["task"] = asyncio.current_task()
        seen["table"] = dict(protocol._request_futures)
        await asyncio.sleep(0)
        return "result"

    params = {"x": [1, {"y": 2}]}
    protocol._execute_handler(7, handler, callback, args=(params, "peer"))
    future = await callback.wait()
    assert seen["args"][0] is params and seen["args"][1] == "peer"  # the very dict: nothing reshaped
    assert seen["table"] == {7: seen["task"]}  # the in-flight table maps the id to the handler's own task
    assert future is seen["task"]  # the callback gets the task itself
    assert future.result() == "result"
    assert protocol._request_futures == {7: future}  # pygls leaves the entry: the adapter's callback pops it
    assert protocol.sent == []


async def test_the_task_first_step_is_queued_when_execute_handler_returns() -> None:
    """The dispatcher's order within one read: a callback queued after the start runs after the handler's first step."""
    protocol = make_protocol()
    callback = Callbacks()
    order: list[str] = []

    async def handler() -> None:
        order.append("handler")

    protocol._execute_handler(1, handler, callback)
    assert order == []  # not run inline
    asyncio.get_running_loop().call_soon(order.append, "queued after")
    await callback.wait()
    assert order == ["handler", "queued after"]


async def test_the_task_runs_in_a_copy_of_the_callers_context() -> None:
    protocol = make_protocol()
    callback = Callbacks()
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller")

    async def handler() -> str:
        seen = var.get()
        var.set("handler")
        return seen

    protocol._execute_handler(1, handler, callback)
    assert (await callback.wait()).result() == "caller"
    assert var.get() == "caller"  # the handler's changes stay in its task


async def test_cancelling_the_table_entry_cancels_the_task_and_the_callback_sees_it() -> None:
    protocol = make_protocol()
    callback = Callbacks()
    started = asyncio.Event()

    async def handler() -> None:
        started.set()
        await asyncio.Event().wait()

    protocol._execute_handler("r-1", handler, callback)
    async with asyncio.timeout(5):
        await started.wait()
    task: Any = protocol._request_futures["r-1"]  # typed as a concurrent future; an asyncio task in fact
    assert isinstance(task, asyncio.Task)
    assert task.cancel()
    assert (await callback.wait()).cancelled()
    assert protocol.sent == []  # pygls answered nothing on its own


async def test_a_failing_handler_reaches_the_callback_with_its_exception_and_nothing_is_sent() -> None:
    protocol = make_protocol()
    callback = Callbacks()

    async def handler() -> None:
        raise ValueError("boom")

    protocol._execute_handler(9, handler, callback)
    assert isinstance((await callback.wait()).exception(), ValueError)
    assert protocol.sent == []


def test_a_plain_function_would_run_inline_not_as_a_task() -> None:
    """Why the adapter hands pygls a coroutine function of its own (``_run``): pygls picks the way it runs a handler
    by the handler's kind, and only a coroutine function becomes a task in the table."""
    protocol = make_protocol()
    callback = Callbacks()
    protocol._execute_handler(3, lambda: "inline", callback)
    [future] = callback.done
    assert future.result() == "inline"
    assert protocol._request_futures == {}


# -- the adapter --------------------------------------------------------------------------------------------------


async def test_handler_tasks_own_each_task_from_its_start_until_its_callback() -> None:
    tasks = HandlerTasks()
    gate = asyncio.Event()
    finished: list[tuple[MsgId, bool, Any]] = []
    in_table_at_finish: list[bool] = []

    async def handler(a: int, b: int) -> int:
        await gate.wait()
        return a + b

    def done(msg_id: MsgId, task: asyncio.Future[Any]) -> None:
        in_table_at_finish.append(msg_id in tasks)
        finished.append((msg_id, task.cancelled(), None if task.cancelled() else task.result()))

    tasks.start(1, done, handler, 2, 3)
    tasks.start("two", done, handler, 0, 0)
    assert 1 in tasks and "two" in tasks and 3 not in tasks
    running = tasks.running()
    assert len(running) == 2 and all(isinstance(task, asyncio.Task) for task in running)
    two = tasks.get("two")
    assert two is not None and two.cancel()
    gate.set()
    async with asyncio.timeout(5):
        await asyncio.gather(*running, return_exceptions=True)
    await asyncio.sleep(0)  # done-callbacks run one turn after the task ends
    assert {entry[0]: entry[1:] for entry in finished} == {1: (False, 5), "two": (True, None)}
    assert in_table_at_finish == [False, False]  # out of the table before the answer is built
    assert tasks.running() == [] and tasks.get(1) is None


def test_handler_tasks_leave_pygls_without_features_and_without_a_writer() -> None:
    tasks = HandlerTasks()
    assert tasks._protocol.fm.features == {}
    assert tasks._protocol.writer is None


# -- why not pygls' public path ----------------------------------------------------------------------------------


async def test_pygls_public_path_reshapes_and_answers_a_failure_with_its_traceback() -> None:
    """``handle_message`` (after ``structure_message``) looks the method up in pygls' own feature table, gives the
    handler params reshaped by its converter, and answers an unexpected exception with the traceback as data: the
    three things the adapter avoids by calling ``_execute_handler`` itself."""
    protocol = make_protocol()
    got: list[Any] = []

    async def handler(params: Any) -> Any:
        got.append(params)
        raise ValueError("secret detail")

    protocol.fm.feature("x/fail")(handler)
    message = {"jsonrpc": "2.0", "id": 1, "method": "x/fail", "params": {"sessionId": "s"}}
    protocol.handle_message(protocol.structure_message(message))
    async with asyncio.timeout(5):
        await protocol.wrote.wait()
    [params] = got
    assert type(params) is not dict  # reshaped (a namedtuple), not the dict that came
    [reply] = protocol.sent
    error = protocol._converter.unstructure(reply)["error"]
    assert error["message"] == "ValueError: secret detail"  # the exception's own text, to the client
    assert "traceback" in error["data"]


# -- why responses bypass pygls ----------------------------------------------------------------------------------


async def test_pygls_routes_a_response_to_the_table_of_in_flight_request_tasks() -> None:
    """pygls' ``send_request`` futures share ``_request_futures`` with the client's in-flight requests: a client
    response carrying the id of one of its own requests would be handed to that handler's task (a crash, and the
    request forgotten). Hence the dispatcher's own table of outgoing requests, and responses kept away from pygls."""
    protocol = make_protocol()
    callback = Callbacks()
    started = asyncio.Event()

    async def handler() -> None:
        started.set()
        await asyncio.Event().wait()

    protocol._execute_handler(5, handler, callback)
    async with asyncio.timeout(5):
        await started.wait()
    task = protocol._request_futures[5]
    with pytest.raises(RuntimeError):  # Task.set_result
        protocol.handle_message(protocol.structure_message({"jsonrpc": "2.0", "id": 5, "result": 1}))
    assert 5 not in protocol._request_futures  # the handler's entry is gone: it could no longer be cancelled by id
    task.cancel()
    await callback.wait()


def test_pygls_send_request_registers_its_future_in_the_request_table_and_writes_at_once() -> None:
    protocol = make_protocol()
    future = protocol.send_request("fs/read_text_file", {"path": "/x"})
    [(msg_id, registered)] = protocol._request_futures.items()
    assert registered is future  # the same table as the in-flight request tasks
    [sent] = protocol.sent  # written synchronously through _send_data: no origin, no backpressure
    assert isinstance(sent, JsonRPCRequestMessage) and sent.id == msg_id
