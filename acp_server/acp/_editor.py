"""The editor side of one prompt's tool calls, over the connection that sent the prompt (ACP v1 client methods).

Capabilities are those the client advertised in ``initialize``: :meth:`ClientCapabilities.tool_client` hands the
tools only the parts it advertised, so a method it did not advertise is never called (the tool then runs locally).
Every request waits until the prompt's earlier updates have been handed to the wire, so a permission request never
overtakes the ``tool_call`` it is about. A file request (``fs/*``) not answered within ``fs_timeout_ms`` fails
(:class:`RemoteError`; its late answer is ignored); the terminal requests are bounded by the command's timeout (the
tools layer), a permission request by the prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ..domain import ToolCallStarted
from ..errors import RemoteError
from ..limits import DEFAULT_FS_REQUEST_TIMEOUT_MS
from ..tools import PERMISSION_OPTIONS, PermissionChoice, TerminalExit, TerminalOutput, ToolClient, permission_choice
from ._convert import tool_call_fields
from ._elicitation import elicitation_modes

if TYPE_CHECKING:
    from ..bridge import PromptStream
    from ._peer import Peer

__all__ = ["AcpEditor", "ClientCapabilities"]

logger = logging.getLogger("acp_server.acp")


class ClientCapabilities:
    """What the client advertised in ``initialize`` (``clientCapabilities``); anything malformed reads as absent.
    ``notices``, ``compaction``: ``session.notices``, ``session.compaction`` (ACP 1.25: an object, ``{}``
    advertises it)."""

    __slots__ = (
        "compaction",
        "elicitation",
        "notices",
        "plan",
        "read_text_file",
        "subagents",
        "terminal",
        "write_text_file",
    )

    def __init__(self, raw: object = None) -> None:
        caps = raw if isinstance(raw, dict) else {}
        fs = caps.get("fs") if isinstance(caps.get("fs"), dict) else {}
        assert isinstance(fs, dict)
        self.read_text_file = fs.get("readTextFile") is True
        self.write_text_file = fs.get("writeTextFile") is True
        self.terminal = caps.get("terminal") is True
        session = caps.get("session") if isinstance(caps.get("session"), dict) else {}
        assert isinstance(session, dict)
        self.notices = isinstance(session.get("notices"), dict)
        self.compaction = isinstance(session.get("compaction"), dict)
        self.plan = isinstance(caps.get("plan"), dict)  # unstable: plan_update / plan_removed
        self.elicitation = elicitation_modes(caps)  # "form", "url": an MCP server's elicitation/create is forwarded
        self.subagents = isinstance(caps.get("subagents"), dict)  # unstable: children as their own sessions

    def tool_client(self, editor: AcpEditor) -> ToolClient:
        """``editor``'s parts the client advertised: permission always, each of reading, writing and terminals
        only when advertised (absent, the tools do it locally)."""
        return ToolClient(
            permission=editor,
            reader=editor if self.read_text_file else None,
            writer=editor if self.write_text_file else None,
            terminal=editor if self.terminal else None,
        )


def _object(result: Any, method: str) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise RemoteError(f"{method} failed: the client answered {type(result).__name__}, not an object")
    return result


class AcpEditor:
    """The client's methods for one prompt's tool calls over its connection's :class:`Peer`: a
    :class:`~acp_server.tools.PermissionAsker`, :class:`~acp_server.tools.EditorReader`,
    :class:`~acp_server.tools.EditorWriter` and :class:`~acp_server.tools.EditorTerminal`, of which the tools get
    the parts the client advertised (:meth:`ClientCapabilities.tool_client`)."""

    def __init__(self, peer: Peer, session_id: str, *, fs_timeout_ms: int = DEFAULT_FS_REQUEST_TIMEOUT_MS) -> None:
        self._peer = peer
        self._session_id = session_id
        self._fs_timeout_ms = fs_timeout_ms
        self.fs_timeout_ms = fs_timeout_ms
        self.session_id = session_id
        self.stream: PromptStream | None = None  # the prompt's events: requests wait until they are delivered

    async def _request(
        self, method: str, params: dict[str, Any], on_late: Callable[[Any], None] | None = None
    ) -> dict[str, Any]:
        if self.stream is not None:
            await self.stream.wait_delivered()
        result = await self._peer.request(method, {"sessionId": self._session_id, **params}, on_late=on_late)
        return _object(result if result is not None else {}, method)

    async def _fs_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """:meth:`_request`, failed when the client has not answered within the fs bound."""
        with anyio.move_on_after(self._fs_timeout_ms / 1000):
            return await self._request(method, params)
        raise RemoteError(f"{method} failed: the editor did not answer within {self._fs_timeout_ms} ms")

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        """The kind of option the user picked; ``cancelled``, an unknown option or a malformed answer reject once."""
        result = await self._request(
            "session/request_permission", {"toolCall": tool_call_fields(call), "options": list(PERMISSION_OPTIONS)}
        )
        outcome = result.get("outcome")
        if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
            option_id = outcome.get("optionId")
            choice = permission_choice(option_id)
            if choice is not None:
                return choice
            logger.info("permission for %s: unknown option %r, read as a rejection", call.call_id, outcome)
        return "reject_once"

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        params: dict[str, Any] = {"path": path}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        content = (await self._fs_request("fs/read_text_file", params)).get("content")
        if not isinstance(content, str):
            raise RemoteError("fs/read_text_file failed: the client's answer has no text content")
        return content

    async def write_text_file(self, path: str, content: str) -> None:
        await self._fs_request("fs/write_text_file", {"path": path, "content": content})

    async def create_terminal(self, command: str, cwd: str, output_byte_limit: int) -> str:
        # The whole command line as ``command``: the client runs it in its shell, as the user would type it.
        params = {"command": command, "cwd": cwd, "outputByteLimit": output_byte_limit}
        terminal_id = (await self._request("terminal/create", params, on_late=self._release_late)).get("terminalId")
        if not isinstance(terminal_id, str):
            raise RemoteError("terminal/create failed: the client's answer has no terminalId")
        return terminal_id

    def _release_late(self, result: Any) -> None:
        """A terminal created after its call was given up (cancelled, timed out): release it at once, which kills
        its command (ACP), so nothing the model asked for runs on unwatched."""
        terminal_id = result.get("terminalId") if isinstance(result, dict) else None
        if isinstance(terminal_id, str):
            logger.info("terminal %s was created after its call ended: releasing it", terminal_id)
            self._peer.post_request("terminal/release", {"sessionId": self._session_id, "terminalId": terminal_id})

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit:
        return _exit(await self._request("terminal/wait_for_exit", {"terminalId": terminal_id}))

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        result = await self._request("terminal/output", {"terminalId": terminal_id})
        output = result.get("output")
        status = result.get("exitStatus")
        return TerminalOutput(
            output if isinstance(output, str) else "",
            result.get("truncated") is True,
            _exit(status) if isinstance(status, dict) else None,
        )

    async def kill_terminal(self, terminal_id: str) -> None:
        await self._request("terminal/kill", {"terminalId": terminal_id})

    async def release_terminal(self, terminal_id: str) -> None:
        await self._request("terminal/release", {"terminalId": terminal_id})


def _exit(result: Mapping[str, Any]) -> TerminalExit:
    code = result.get("exitCode")
    signal = result.get("signal")
    return TerminalExit(
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        signal if isinstance(signal, str) else None,
    )
