"""``DaemonClient``: the daemon's REST + SSE routes as async methods, with local prompt reservations (Q11–Q13).

Lifecycle, like an httpx client: usable once constructed (no task is started), ``async with`` closes it on exit,
``aclose()`` is idempotent, and any use after it raises :class:`DaemonClientClosedError`.

A prompt's local slot is reserved synchronously before any byte is sent and released exactly once, when the
prompt's outcome is known to this client: the ``?wait=true`` 200, its ``turn_complete`` / ``turn_error`` on the
event stream (matched by ``promptId``), the caller's cancellation, the end of the event stream, or a failed request
or unreadable answer. Its settings are checked in ``_options.py``; following a prompt is ``_prompting.py``'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import anyio
import httpx2

from ..limits import DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION
from ._exceptions import (
    DaemonClientClosedError,
    DaemonClientError,
    DaemonFeatureUnavailableError,
    DaemonNotFoundError,
    DaemonProtocolError,
)
from ._http import error_from_response, json_object, map_httpx_errors
from ._limits import PromptReservations, PromptSlot, validate_limit
from ._models import Capabilities, PromptInput, PromptResult, SessionConfig, parse_capabilities, parse_config
from ._options import (
    DEFAULT_RECONNECT_DELAYS,
    DEFAULT_TIMEOUT,
    Timeouts,
    base_url_of,
    headers_for,
    reconnect_delays_of,
)
from ._prompting import Accepted, cancel_abandoned, prompt_answer, prompt_body, run_turn
from ._stream import EventStream
from ._turn import OnPermission, OnUpdate, TurnItem, TurnTracker

__all__ = ["DaemonClient"]


class DaemonClient:
    """A client of one ``acp-server serve`` daemon.

    ``token``: the bearer token (default: ``$ACP_SERVER_TOKEN``; none when empty). ``max_pending_prompts_per_session``
    takes the value of ``/capabilities.limits.maxPendingPromptsPerSession`` as is: ``None`` (the daemon's "unlimited"),
    ``0`` and ``math.inf`` disable the local limit; a negative, fractional or NaN value (or a bool) is a
    ``ValueError``. :meth:`from_capabilities` adopts the daemon's value. ``reconnect_delays``: see
    :class:`EventStream`. ``transport``: an httpx2 transport (tests, proxies, Unix sockets).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        max_pending_prompts_per_session: int | float | None = DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION,
        timeout: float | httpx2.Timeout | None = DEFAULT_TIMEOUT,
        reconnect_delays: Sequence[float] = DEFAULT_RECONNECT_DELAYS,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._limit = validate_limit(max_pending_prompts_per_session)
        self._reconnect_delays = reconnect_delays_of(reconnect_delays)
        self._base_url = base_url_of(base_url)
        headers = headers_for(token)
        timeouts = Timeouts.of(timeout)
        self._timeout = timeouts.request
        self._events_timeout = timeouts.events
        self._wait_timeout = timeouts.wait
        self._reservations = PromptReservations()
        self._closed = False
        self._http = httpx2.AsyncClient(
            base_url=self._base_url, headers=headers, timeout=self._timeout, transport=transport
        )

    @classmethod
    async def from_capabilities(
        cls,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float | httpx2.Timeout | None = DEFAULT_TIMEOUT,  # noqa: ASYNC109 (the HTTP client's setting)
        reconnect_delays: Sequence[float] = DEFAULT_RECONNECT_DELAYS,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> Self:
        """A client whose local limit is the daemon's ``maxPendingPromptsPerSession`` (read once, now)."""
        client = cls(
            base_url,
            token=token,
            max_pending_prompts_per_session=None,
            timeout=timeout,
            reconnect_delays=reconnect_delays,
            transport=transport,
        )
        try:
            capabilities = await client.capabilities()
        except BaseException:
            await client.aclose()
            raise
        client._limit = capabilities.max_pending_prompts_per_session
        return client

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def limit(self) -> int | None:
        """The local per-session limit; None = disabled."""
        return self._limit

    def pending_prompts(self, session_id: str) -> int:
        """Prompts of ``session_id`` this client sent (or is sending) whose outcome it has not seen yet."""
        return self._reservations.pending(session_id)

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection; idempotent. Requests and streams in flight end with
        :class:`DaemonClientClosedError`."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._http.aclose()

    def _check_open(self, what: str = "") -> None:
        if self._closed:
            raise DaemonClientClosedError(f"The DaemonClient of {self._base_url} is closed{what}")

    # -- requests ----------------------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self._base_url}{path}"

    @staticmethod
    def _session_path(session_id: str, suffix: str = "") -> str:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty string; got {session_id!r}")
        return f"/session/{quote(session_id, safe='')}{suffix}"

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        http_timeout: httpx2.Timeout | None = None,
        expect: tuple[int, ...] = (200,),
        session_id: str | None = None,
    ) -> httpx2.Response:
        """One request, its body read; an unexpected status raises its mapped error."""
        self._check_open()
        url = self._url(path)
        with map_httpx_errors(method, url, lambda: self._closed):
            response = await self._http.request(
                method,
                path,
                json=json,
                params=params,
                timeout=http_timeout if http_timeout is not None else self._timeout,
            )
        if response.status_code not in expect:
            raise error_from_response(response, method, url, session_id=session_id)
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> Mapping[str, Any]:
        response = await self._send(method, path, **kwargs)
        return json_object(response, method, self._url(path))

    # -- routes ------------------------------------------------------------------------------------------------

    async def health(self) -> bool:
        """``GET /health`` answered ``{"status": "ok"}``."""
        return (await self._json("GET", "/health")).get("status") == "ok"

    async def capabilities(self) -> Capabilities:
        """``GET /capabilities``."""
        body = await self._json("GET", "/capabilities")
        try:
            return parse_capabilities(body)
        except ValueError as exc:
            url = self._url("/capabilities")
            raise DaemonProtocolError(f"GET {url}: {exc}", method="GET", url=url, status_code=200) from exc

    async def create_session(
        self,
        cwd: str | os.PathLike[str],
        *,
        mode_id: str | None = None,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] | None = None,
    ) -> str:
        """``POST /session``: a new session working in ``cwd`` (an absolute path) in ``mode_id`` (None: the daemon's
        default, ``Capabilities.default_mode_id``), stored with it either way; its id. A mode the daemon does not
        offer is :class:`DaemonInvalidRequestError` (a daemon without a token offers only ``read-only``).
        ``mcp_servers``: MCP servers it connects to, in ACP's ``mcpServers`` shape (``{"name", "command", "args",
        "env": [{"name", "value"}]}``, or ``{"type": "http"|"sse", "name", "url", "headers": [...]}``).
        ``additional_directories``: further roots its tools may use (absolute paths of existing directories; a bad
        one is :class:`DaemonInvalidRequestError` naming it)."""
        request: dict[str, Any] = {"cwd": os.fspath(cwd)}
        if mode_id is not None:
            request["modeId"] = mode_id
        if mcp_servers is not None:
            request["mcpServers"] = [dict(server) for server in mcp_servers]
        if additional_directories is not None:
            request["additionalDirectories"] = [os.fspath(directory) for directory in additional_directories]
        body = await self._json("POST", "/session", json=request, expect=(201, 200))
        return self._session_id_of(body, "POST", "/session")

    async def set_mode(self, session_id: str, mode_id: str) -> str:
        """``POST /session/{id}/mode``: switch the session's mode (it applies from the next tool call, also in the
        middle of a prompt); the mode now. Unknown or not offered: :class:`DaemonInvalidRequestError`."""
        path = self._session_path(session_id, "/mode")
        body = await self._json("POST", path, json={"modeId": mode_id})
        mode = body.get("modeId")
        if not isinstance(mode, str) or not mode:
            url = self._url(path)
            raise DaemonProtocolError(f"POST {url}: no modeId in {dict(body)!r}", method="POST", url=url)
        return mode

    async def rewind(
        self,
        session_id: str,
        prompt: int | None = None,
        *,
        preview: bool = False,
        files_only: bool = False,
        conversation_only: bool = False,
        force: bool = False,
    ) -> Mapping[str, Any]:
        """``POST /session/{id}/rewind``: without ``prompt`` the session's prompts (``{"prompts": [...]}``); with it,
        a ``preview`` (the files and their diffs, the conflicts) or the rewind to before that prompt (what it
        restored and removed). Files changed since by someone else: a ``DaemonHTTPError`` (409, code
        ``rewind_conflict``) unless ``force``."""
        body: dict[str, Any] = {} if prompt is None else {"prompt": prompt}
        flags = {"preview": preview, "filesOnly": files_only, "conversationOnly": conversation_only, "force": force}
        body.update({name: True for name, value in flags.items() if value})
        return await self._json("POST", self._session_path(session_id, "/rewind"), json=body)

    async def set_config_option(self, session_id: str, config_id: str, value: str) -> SessionConfig:
        """``POST /session/{id}/config``: set a session config option, like ACP's ``session/set_config_option`` —
        ``"mode"`` (as :meth:`set_mode`) or ``"model"`` (stored; the session's next model requests use it,
        ``Capabilities.models`` lists the choices); the session's config now. An unknown option or a value it does
        not offer: :class:`DaemonInvalidRequestError` (``details`` name ``configId`` / ``value``), nothing changed."""
        path = self._session_path(session_id, "/config")
        body = await self._json("POST", path, json={"configId": config_id, "value": value}, session_id=session_id)
        try:
            return parse_config(body)
        except ValueError as exc:
            url = self._url(path)
            raise DaemonProtocolError(f"POST {url}: {exc}", method="POST", url=url, status_code=200) from exc

    async def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None:
        """``POST /session/{id}/permission/{requestId}``: answer a pending permission request with one of its
        options (``PermissionRequestEvent.options``). Raises :class:`DaemonPermissionRequestNotFoundError` when it is
        no longer pending (answered, or its prompt ended), :class:`DaemonInvalidRequestError` for an unknown option."""
        if not isinstance(request_id, str) or not request_id:
            raise ValueError(f"request_id must be a non-empty string; got {request_id!r}")
        path = self._session_path(session_id, f"/permission/{quote(request_id, safe='')}")
        await self._send("POST", path, json={"optionId": option_id}, expect=(204, 200))

    async def load_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None) -> str:
        """``POST /session/{id}/load`` (a stored session, history replayed on its event stream).

        Raises :class:`DaemonFeatureUnavailableError` when the daemon does not serve it (it does not yet:
        ``session.load`` is absent from its ``features``).
        """
        return await self._attach("load", "session.load", session_id, cwd)

    async def resume_session(
        self,
        session_id: str,
        cwd: str | os.PathLike[str] | None = None,
        *,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] | None = None,
    ) -> str:
        """``POST /session/{id}/resume`` (a stored session, no replay), connecting to ``mcp_servers`` (as
        :meth:`create_session`; None: the attached session keeps its own) with ``additional_directories`` as its
        whole list (None: it keeps its own); :class:`DaemonFeatureUnavailableError` when the daemon does not serve
        it."""
        return await self._attach("resume", "session.resume", session_id, cwd, mcp_servers, additional_directories)

    async def _attach(
        self,
        verb: str,
        feature: str,
        session_id: str,
        cwd: str | os.PathLike[str] | None,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
        additional_directories: Sequence[str | os.PathLike[str]] | None = None,
    ) -> str:
        path = self._session_path(session_id, f"/{verb}")
        body: dict[str, Any] = {} if cwd is None else {"cwd": os.fspath(cwd)}
        if mcp_servers is not None:
            body["mcpServers"] = [dict(server) for server in mcp_servers]
        if additional_directories is not None:
            body["additionalDirectories"] = [os.fspath(directory) for directory in additional_directories]
        try:
            answer = await self._json("POST", path, json=body, expect=(200, 201))
        except DaemonNotFoundError as exc:  # no such route (an unknown session is DaemonSessionNotFoundError)
            raise DaemonFeatureUnavailableError(feature, exc) from exc
        return self._session_id_of(answer, "POST", path) if "sessionId" in answer else session_id

    def _session_id_of(self, body: Mapping[str, Any], method: str, path: str) -> str:
        session_id = body.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            url = self._url(path)
            raise DaemonProtocolError(f"{method} {url}: no sessionId in {dict(body)!r}", method=method, url=url)
        return session_id

    async def close_session(self, session_id: str) -> None:
        """``DELETE /session/{id}``: its prompts end (``session_closed``), its event streams end."""
        await self._send("DELETE", self._session_path(session_id), expect=(204, 200))

    async def delete_session(self, session_id: str) -> None:
        """``POST /session/{id}/delete`` (ACP ``session/delete``): closed as by :meth:`close_session` (its running
        prompt cancelled first), then removed with its stored history for good. :class:`DaemonSessionNotFoundError`
        when unknown; :class:`DaemonFeatureUnavailableError` when the daemon does not serve it (``session.remove``)."""
        path = self._session_path(session_id, "/delete")
        try:
            await self._send("POST", path, expect=(204, 200))
        except DaemonNotFoundError as exc:  # no such route (an unknown session is DaemonSessionNotFoundError)
            raise DaemonFeatureUnavailableError("session.remove", exc) from exc

    async def cancel(self, session_id: str) -> None:
        """``POST /session/{id}/cancel``: stop the session's *running* prompt, whoever sent it."""
        await self._send("POST", self._session_path(session_id, "/cancel"), expect=(204, 200))

    async def cancel_prompt(self, session_id: str, prompt_id: str) -> None:
        """``POST /session/{id}/prompt/{promptId}/cancel``: cancel exactly this prompt, waiting or running.

        Raises :class:`DaemonPromptNotFoundError` when it is no longer pending (unknown, or already ended).
        """
        path = self._session_path(session_id, f"/prompt/{quote(prompt_id, safe='')}/cancel")
        await self._send("POST", path, expect=(204, 200))

    def events(self, session_id: str, last_event_id: int | None = None) -> EventStream:
        """The session's events after ``last_event_id`` (None: from now on), reconnecting with ``Last-Event-ID``.

        Use it as ``async with client.events(sid) as events: async for event in events: ...``.
        """
        self._check_open()
        self._session_path(session_id)
        if last_event_id is not None and (
            isinstance(last_event_id, bool) or not isinstance(last_event_id, int) or last_event_id < 0
        ):
            raise ValueError(f"last_event_id must be a non-negative integer or None; got {last_event_id!r}")
        return EventStream(self, session_id, last_event_id, self._reconnect_delays)

    # -- what an EventStream needs -----------------------------------------------------------------------------

    def _events_url(self, session_id: str) -> str:
        return self._url(self._session_path(session_id, "/events"))

    async def _open_events(self, session_id: str, last_event_id: int | None) -> httpx2.Response:
        """The 200 ``text/event-stream`` response (body unread), or the mapped error."""
        self._check_open()
        path = self._session_path(session_id, "/events")
        url = self._url(path)
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        request = self._http.build_request("GET", path, headers=headers, timeout=self._events_timeout)
        with map_httpx_errors("GET", url, lambda: self._closed):
            response = await self._http.send(request, stream=True)
            if response.status_code != 200:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        if response.status_code != 200:
            raise error_from_response(response, "GET", url)
        return response

    # -- prompts -----------------------------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        prompt: PromptInput,
        *,
        deadline_ms: int | None = None,
        wait: bool = False,
        on_update: OnUpdate | None = None,
        on_permission: OnPermission | None = None,
    ) -> PromptResult:
        """Send a prompt and wait for its turn to end: its :class:`PromptResult` (``stop_reason``), or an error.

        Raises :class:`DaemonPendingPromptLimitError` at once, having sent nothing, when this client already has
        ``limit`` prompts in flight for the session; :class:`DaemonPromptQueueFullError` when the daemon refuses it;
        :class:`DaemonTurnError` when the accepted turn fails. ``on_update`` gets the turn's ``session_update`` and
        ``tool_call`` events in order. ``on_permission`` answers each permission request of the turn (it returns an
        option id; the turn waits meanwhile); **without it every permission request is rejected**. ``wait=True``
        uses the daemon's blocking mode (one request, no event stream; leaving it cancels the prompt on the daemon)
        and takes neither: its permission requests wait, unanswered by this call, until the prompt's deadline.

        Cancelling the call cancels exactly this prompt on the daemon (``POST .../prompt/{promptId}/cancel``):
        a waiting one leaves the queue, a running one stops.
        """
        body = prompt_body(prompt, deadline_ms)
        if wait and on_update is not None:
            raise ValueError("on_update needs the event stream; it cannot be used with wait=True")
        if wait and on_permission is not None:
            raise ValueError("on_permission needs the event stream; it cannot be used with wait=True")
        self._check_open()
        with self._reserve(session_id, self._limit) as slot:
            outcome = await self._submit(session_id, body, wait=wait)
            if isinstance(outcome, PromptResult):
                return outcome
            tracker = TurnTracker(session_id, outcome.prompt_id, outcome.event_id)
            try:
                async with self.events(session_id, outcome.event_id - 1) as stream:  # from its prompt_accepted on

                    async def next_item() -> TurnItem | None:
                        async for event in stream:
                            item = tracker.feed(event)
                            if item is not None:
                                return item
                        return None

                    return await run_turn(self, tracker, slot, next_item, on_update, on_permission)
            except BaseException as exc:  # given up while its event stream was still opening: it is abandoned too
                if not isinstance(exc, DaemonClientError) and not tracker.done:
                    slot.release()
                    await cancel_abandoned(self, tracker)
                raise

    def _reserve(self, session_id: str, limit: int | None) -> PromptSlot:
        """Synchronous: a slot, or :class:`DaemonPendingPromptLimitError` before anything is sent."""
        self._session_path(session_id)
        self._check_open()
        return self._reservations.reserve(session_id, limit)

    async def _submit(self, session_id: str, body: Mapping[str, Any], *, wait: bool) -> PromptResult | Accepted:
        """``POST /session/{id}/prompt``: the 200 result (blocking mode) or the 202 acceptance."""
        path = self._session_path(session_id, "/prompt")
        url = self._url(path)
        response = await self._send(
            "POST",
            path,
            json=body,
            params={"wait": "true"} if wait else None,
            http_timeout=self._wait_timeout if wait else None,
            expect=(200, 202),
            session_id=session_id if wait else None,  # only a blocking answer can carry the turn's failure
        )
        return prompt_answer(response.status_code, json_object(response, "POST", url), url)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<DaemonClient {self._base_url} {state} limit={self._limit}>"
