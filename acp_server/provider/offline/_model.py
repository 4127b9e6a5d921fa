"""The loopback model: a scripted, deterministic OpenAI-compatible endpoint on 127.0.0.1 (anyio + h11 only).

Every wait is an anyio sleep or event, so it runs on asyncio in production and on trio's virtual clock in
tests.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar, Self

import anyio
import h11
from anyio.abc import Listener, SocketAttribute, SocketStream

from ...grammar_bounds import grammar_problem
from ...tasks import Lifecycle, OwnedTaskGroup
from . import _wire
from ._behaviours import Behaviour
from ._default import default_behaviour
from ._exchange import Exchange, send_json
from ._http import HttpConnection, HttpRequest
from ._play import play
from ._records import Disconnect, RecordedRequest
from ._validate import INVALID_REQUEST_STATUS, message_problem, validation_error_body

logger = logging.getLogger(__name__)

_CHAT_PATH = "/v1/chat/completions"
_MODELS_PATH = "/v1/models"
_ALLOWED = {_CHAT_PATH: "POST", _MODELS_PATH: "GET"}
_MAX_BODY_BYTES = 32 * 1024 * 1024


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


class LoopbackModel:
    """An OpenAI-compatible chat endpoint that plays scripted behaviours, FIFO, then the default answer
    (``_default.py``: an ``update_plan`` call for a ``plan: a; b`` prompt, a ``read_file`` call for a file the
    prompt names when the request offers that tool, an answer from its result, else the prompt echoed).

    Open it once with ``async with``: it listens on an ephemeral port and owns one task group holding the
    accept loop and one task per connection; leaving the block cancels them all and closes every socket.
    Client disconnects are recorded in ``disconnects`` and never raise out of the model.

    ``requests`` lists every HTTP request (any path) but the model list's: those (``GET /v1/models``, which a
    server may send at any time) are in ``model_list_requests``, so they never shift the chat requests' indexes.
    ``disconnects`` lists every client that left before its chat response ended.

    A chat request whose messages the strictest common server refuses (``_validate.py``: a null ``content``, say)
    is answered HTTP 500 with that server's validation error, before any scripted behaviour is used.

    ``GET /v1/models`` lists ``listed_models`` (entries: an ``id``, maybe more fields; default the one
    ``model_id``; chunks echo the request's ``model``), after ``model_list_gate`` is set when there is one, or
    answers ``model_list_status`` (an error status) when it is not None.

    ``context_window`` (None: unlimited) makes it refuse, as OpenAI does (HTTP 400, code
    ``context_length_exceeded``, the window and the count in the message), every chat request whose prompt tokens
    (its words, as reported in usage) exceed it; ``refusals`` lists the indexes of the requests refused so. A
    refusal takes no scripted behaviour. ``unsupported_fields``: request fields it refuses as OpenAI's reasoning
    models refuse ``max_tokens`` (HTTP 400, ``unsupported_parameter``), before any behaviour. An answer is cut at
    the request's ``max_completion_tokens`` or ``max_tokens`` (a chunk a token), ending ``length``.
    ``answer_with`` (None: none), asked with each chat request's body when
    no behaviour is scripted, returns the behaviour to play (None: the default answer).
    """

    model_id: ClassVar[str] = "loopback"

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.model_list_requests: list[RecordedRequest] = []
        self.listed_models: list[dict[str, Any]] = [{"id": self.model_id}]
        self.model_list_gate: anyio.Event | None = None
        self.model_list_status: int | None = None
        self.disconnects: list[Disconnect] = []
        self.context_window: int | None = None
        self.refusals: list[int] = []
        self.unsupported_fields: set[str] = set()
        self.answer_with: Callable[[dict[str, Any]], Behaviour | None] | None = None
        self._script: deque[Behaviour] = deque()
        self._life = Lifecycle.UNOPENED
        self._port: int | None = None
        self._changed: anyio.Event | None = None
        self._listener: Listener[SocketStream] | None = None
        self._tasks = OwnedTaskGroup()
        self._connection_numbers = itertools.count()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the SDK's ``base_url``."""
        if self._port is None:
            raise RuntimeError("the LoopbackModel is not open yet")
        return f"http://127.0.0.1:{self._port}/v1"

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Script the responses to the next chat requests, in order."""
        for behaviour in behaviours:
            if not isinstance(behaviour, Behaviour):
                raise TypeError(f"not a loopback behaviour: {behaviour!r}")
        self._script.extend(behaviours)

    async def wait_for_requests(self, n: int) -> list[RecordedRequest]:
        """Wait until ``n`` requests were received; return the first ``n``."""
        while len(self.requests) < n:
            await self._changed_event().wait()
        return self.requests[:n]

    async def wait_for_model_list_requests(self, n: int) -> list[RecordedRequest]:
        """Wait until ``n`` model list requests were received (not necessarily answered); return the first ``n``."""
        while len(self.model_list_requests) < n:
            await self._changed_event().wait()
        return self.model_list_requests[:n]

    async def wait_for_disconnects(self, n: int) -> list[Disconnect]:
        """Wait until ``n`` premature disconnects were seen; return the first ``n``."""
        while len(self.disconnects) < n:
            await self._changed_event().wait()
        return self.disconnects[:n]

    async def __aenter__(self) -> Self:
        if self._life is not Lifecycle.UNOPENED:
            raise RuntimeError(f"a LoopbackModel can be opened only once (this one is {self._life.value})")
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        try:
            task_group = await self._tasks.enter()
        except BaseException:
            await anyio.aclose_forcefully(listener)
            raise
        self._listener = listener
        self._changed = anyio.Event()
        self._port = listener.extra(SocketAttribute.local_port)
        task_group.start_soon(listener.serve, self._serve_connection, task_group)
        self._life = Lifecycle.OPEN
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Cancel every connection task (and the accept loop), leave the task group, then close the listener.

        A body error propagates unchanged (not wrapped in an exception group).
        """
        self._life = Lifecycle.CLOSED
        listener, self._listener = self._listener, None
        try:
            self._tasks.group.cancel_scope.cancel()
            return await self._tasks.exit(exc_type, exc, tb)
        finally:
            if listener is not None:
                await anyio.aclose_forcefully(listener)

    def _changed_event(self) -> anyio.Event:
        if self._changed is None:
            raise RuntimeError("the LoopbackModel is not open yet")
        return self._changed

    def _notify(self) -> None:
        changed, self._changed = self._changed_event(), anyio.Event()
        changed.set()

    async def _serve_connection(self, stream: SocketStream) -> None:
        # anyio runs each spawned task to its first checkpoint, so the finally below always closes the stream
        connection = next(self._connection_numbers)
        http = HttpConnection(stream, max_body_bytes=_MAX_BODY_BYTES)
        try:
            try:
                while (request := await http.receive_request()) is not None:
                    await self._respond(http, request, connection)
                    if not http.start_next_cycle():
                        break
            except h11.RemoteProtocolError as exc:
                if http.can_respond():
                    body = _wire.error_body(f"Malformed HTTP request: {exc}", "invalid_request_error")
                    await send_json(http, exc.error_status_hint, body, [("connection", "close")])
        except anyio.BrokenResourceError:
            pass  # the client vanished outside a chat response: nothing to record
        except Exception:
            logger.exception("loopback model: connection %d failed", connection)
        finally:
            await http.aclose()

    def _record(self, request: HttpRequest, connection: int) -> tuple[RecordedRequest, int]:
        recorded = RecordedRequest(
            method=request.method,
            path=request.target.partition("?")[0],
            headers=request.headers,
            body=_parse_json(request.body),
            received_at=anyio.current_time(),
            connection=connection,
        )
        listing = recorded.path == _MODELS_PATH and recorded.method == "GET"
        records = self.model_list_requests if listing else self.requests
        records.append(recorded)
        self._notify()
        return recorded, len(records) - 1

    async def _list_models(self, http: HttpConnection) -> None:
        if self.model_list_gate is not None:
            await self.model_list_gate.wait()
        if self.model_list_status is not None:
            error = _wire.error_body("The model list is unavailable", "server_error")
            await send_json(http, self.model_list_status, error)
        else:
            await send_json(http, 200, _wire.model_list(self.listed_models))

    async def _respond(self, http: HttpConnection, request: HttpRequest, connection: int) -> None:
        recorded, index = self._record(request, connection)
        path, body = recorded.path, recorded.body
        if path not in _ALLOWED:
            error = _wire.error_body(f"No route for {path}", "invalid_request_error", "not_found")
            await send_json(http, 404, error)
        elif request.method != _ALLOWED[path]:
            error = _wire.error_body(f"{request.method} not allowed on {path}", "invalid_request_error")
            await send_json(http, 405, error, [("allow", _ALLOWED[path])])
        elif path == _MODELS_PATH:
            await self._list_models(http)
        elif request.body_too_large:
            await send_json(http, 413, _wire.error_body("Request body too large", "invalid_request_error"))
        elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            error = _wire.error_body("Expected a JSON object with a 'messages' list", "invalid_request_error")
            await send_json(http, 400, error)
        elif (problem := message_problem(body["messages"])) is not None:
            await send_json(http, INVALID_REQUEST_STATUS, validation_error_body(*problem))
        elif unsupported := sorted(field for field in self.unsupported_fields if field in body):
            await send_json(http, 400, _wire.unsupported_parameter(unsupported[0]))
        elif (refused := grammar_problem(body.get("tools"))) is not None:  # as llama-server --jinja refuses it
            await send_json(http, 400, _wire.error_body(refused, "invalid_request_error"))
        elif self.context_window is not None and (tokens := _wire.count_prompt_words(body)) > self.context_window:
            self.refusals.append(index)
            await send_json(http, 400, _wire.context_length_exceeded(self.context_window, tokens))
        else:
            behaviour = self._script.popleft() if self._script else self._unscripted(body)
            model = body.get("model")
            model = model if isinstance(model, str) else self.model_id
            exchange = Exchange(http, index=index, body=body, model=model)
            await self._play_watched(http, exchange, behaviour, index)

    def _unscripted(self, body: dict[str, Any]) -> Behaviour:
        chosen = self.answer_with(body) if self.answer_with is not None else None
        return default_behaviour(body) if chosen is None else chosen

    async def _play_watched(self, http: HttpConnection, exchange: Exchange, behaviour: Behaviour, index: int) -> None:
        """Play ``behaviour`` while watching the socket: a disconnect is seen even while it is silent."""
        recorded = False

        def note_disconnect() -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                self.disconnects.append(Disconnect(index, anyio.current_time(), exchange.chunks_sent))
                self._notify()

        async with anyio.create_task_group() as task_group:

            async def watch() -> None:
                await http.wait_peer_closed()
                if http.peer_closed and not http.response_ended:
                    note_disconnect()
                    task_group.cancel_scope.cancel()

            task_group.start_soon(watch)
            try:
                await play(behaviour, exchange)
            except anyio.BrokenResourceError:
                note_disconnect()
            task_group.cancel_scope.cancel()
