"""The SDK callback that answers a server's ``elicitation/create`` (``acp_server.mcp._elicitation``): none without an
elicitor; one request per server at a time; the editor's failure or malformed answer is an MCP error."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import types

from acp_server.errors import RemoteError
from acp_server.mcp._elicitation import elicitation_callback

pytestmark = pytest.mark.anyio

FORM = types.ElicitRequestFormParams(message="m", requestedSchema={"type": "object", "properties": {}})


class Editor:
    """An elicitor whose answers the test releases; it records how many requests it held at once."""

    def __init__(self, answer: object = None, modes: frozenset[str] = frozenset({"form"})) -> None:
        self.modes = modes
        self.timeout_s = 60.0
        self.answer = answer if answer is not None else {"action": "decline"}
        self.held = 0
        self.most = 0
        self.asked = anyio.Event()
        self.release = anyio.Event()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def elicit(self, session_id: str, params: dict[str, Any]) -> object:
        self.sent.append((session_id, params))
        self.held += 1
        self.most = max(self.most, self.held)
        self.asked.set()
        await self.release.wait()
        self.held -= 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_no_elicitor_no_callback() -> None:
    assert elicitation_callback("s", "sid", None) is None
    assert elicitation_callback("s", "sid", Editor(modes=frozenset())) is None


async def test_one_request_at_a_time_per_server() -> None:
    editor = Editor()
    callback = elicitation_callback("s", "sid", editor)
    assert callback is not None
    results: list[Any] = []

    async def ask() -> None:
        results.append(await callback(None, FORM))  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        tg.start_soon(ask)
        await editor.asked.wait()
        await anyio.wait_all_tasks_blocked()
        assert editor.held == 1  # the second waits for the first
        editor.release.set()
    assert editor.most == 1 and [r.action for r in results] == ["decline", "decline"]
    assert editor.sent[0] == ("sid", {"mode": "form", "message": "m", "requestedSchema": FORM.requestedSchema})


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (RemoteError("elicitation/create failed: nope"), "elicitation failed: elicitation/create failed: nope"),
        ({"action": "maybe"}, "elicitation failed: the editor's answer is not accept, decline or cancel"),
        ({"action": "accept", "content": {"a": {"b": 1}}}, "elicitation failed: the editor's answer content is"),
    ],
)
async def test_a_failed_or_malformed_answer_is_an_mcp_error(answer: object, said: str) -> None:
    editor = Editor(answer)
    editor.release.set()
    callback = elicitation_callback("s", "sid", editor)
    assert callback is not None
    result = await callback(None, FORM)  # type: ignore[arg-type]
    assert isinstance(result, types.ErrorData) and result.message.startswith(said)
