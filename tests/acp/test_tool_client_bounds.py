"""A file request the editor never answers is bounded: ``fs/read_text_file`` and ``fs/write_text_file`` fail after
``fs_timeout_ms`` (30 s unless set), so the tool call ends ``failed`` with a message that says so, and nothing is
written. Permission requests are not bounded here (the prompt bounds them). Virtual time (trio's MockClock)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.acp._editor import AcpEditor, ClientCapabilities
from acp_server.errors import RemoteError
from acp_server.limits import DEFAULT_FS_REQUEST_TIMEOUT_MS
from acp_server.tools import TOOL_NAMES, ToolCallError, prepare_call

from .test_tool_client import CALL, SID

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

GUARD_S = 600  # virtual: a regression fails here instead of hanging


class SilentPeer:
    """A connection whose client never answers a request (it records what was asked)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    @property
    def request_id(self) -> str | int | None:
        return 1

    def admitted(self) -> None:
        pass

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        pass

    async def request(
        self, method: str, params: Mapping[str, Any], on_late: Callable[[Any], None] | None = None
    ) -> Any:
        self.asked.append(method)
        await anyio.sleep_forever()

    def post_request(self, method: str, params: Mapping[str, Any]) -> None:
        self.asked.append(method)

    def cancel_request(self, request_id: str | int) -> bool:
        return False


CAPS = ClientCapabilities({"fs": {"readTextFile": True, "writeTextFile": True}})


async def test_an_unanswered_read_and_write_fail_after_the_default_bound() -> None:
    client = AcpEditor(SilentPeer(), SID)
    for attempt in (client.read_text_file("/p/a.txt"), client.write_text_file("/p/a.txt", "x")):
        start = anyio.current_time()
        with anyio.fail_after(GUARD_S), pytest.raises(RemoteError, match="did not answer within 30000 ms") as caught:
            await attempt
        assert anyio.current_time() - start == pytest.approx(DEFAULT_FS_REQUEST_TIMEOUT_MS / 1000)
        assert caught.value.code is None


async def test_the_bound_is_the_clients_setting_and_permission_requests_are_not_bounded_by_it() -> None:
    peer = SilentPeer()
    client = AcpEditor(peer, SID, fs_timeout_ms=500)
    start = anyio.current_time()
    with pytest.raises(RemoteError, match="fs/read_text_file failed: the editor did not answer within 500 ms"):
        await client.read_text_file("/p/a.txt")
    assert anyio.current_time() - start == pytest.approx(0.5)
    with anyio.move_on_after(3600) as waited:  # an hour of virtual time: the user may think as long as they like
        await client.request_permission(CALL)
    assert waited.cancelled_caught


def silent_editor() -> AcpEditor:
    return AcpEditor(SilentPeer(), SID, fs_timeout_ms=500)


async def _noop(content: object) -> None:
    pass


async def test_a_file_tool_through_a_silent_editor_ends_failed_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    cwd = str(tmp_path)
    reads = ClientCapabilities({"fs": {"readTextFile": True}}).tool_client(silent_editor())
    writes = ClientCapabilities({"fs": {"writeTextFile": True}}).tool_client(silent_editor())
    both = CAPS.tool_client(silent_editor())
    silent = "did not answer within 500 ms"
    with anyio.fail_after(GUARD_S):
        read = await prepare_call("read_file", '{"path": "a.txt"}', cwd=cwd, client=reads, offered=TOOL_NAMES)
        result = await read.run(_noop)
        assert result.failed
        assert result.output == f"Error: the editor could not read a.txt: fs/read_text_file failed: the editor {silent}"

        write = '{"path": "a.txt", "content": "beta\\n"}'
        result = await (await prepare_call("write_file", write, cwd=cwd, client=writes, offered=TOOL_NAMES)).run(_noop)
        assert result.failed
        assert result.output.endswith(f"could not write a.txt: fs/write_text_file failed: the editor {silent}")

        edit = '{"path": "a.txt", "old_text": "alpha", "new_text": "beta"}'
        with pytest.raises(ToolCallError, match=f"the editor could not read a.txt: .*{silent}"):
            await prepare_call("edit_file", edit, cwd=cwd, client=both, offered=TOOL_NAMES)  # its diff needs the text
    assert (tmp_path / "a.txt").read_text() == "alpha\n"
