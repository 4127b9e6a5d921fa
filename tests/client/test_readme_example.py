"""The manual's client example (docs/sdk.md) runs as written against a real daemon (URL and path swapped in); the copy
below is the example as the page shows it, so a change to either is seen."""

from __future__ import annotations

import re
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel
from tests.docs_pages import page

from ._support import running_daemon

pytestmark = pytest.mark.anyio


EXAMPLE = """\
import anyio
from acp_server.client import DaemonClient, DaemonSessionClient
from acp_server.client import DaemonPendingPromptLimitError, DaemonPromptQueueFullError

async def main() -> None:
    async with await DaemonClient.from_capabilities("http://127.0.0.1:4170") as client:
        async with await DaemonSessionClient.create_or_attach(client, "/path/to/project") as session:
            show = lambda u: print(u.text, end="") if u.kind == "agent_message_chunk" else None
            try:
                result = await session.prompt("Explain this repository", on_update=show)
                print(f"\\n[{result.stop_reason}]")
            except DaemonPendingPromptLimitError as exc:  # refused locally: nothing was sent
                print(f"{exc.pending_count}/{exc.limit} prompts of this session already in flight")
            except DaemonPromptQueueFullError as exc:  # refused by the daemon: 503
                print(f"the daemon's queue is full; retry in {exc.retry_after}s")

anyio.run(main)
"""


def readme_example() -> str:
    found = re.search(r"```python\n(.*?)```", page("sdk.md"), re.S)
    assert found is not None, "docs/sdk.md lost its example"
    return found.group(1)


def test_the_example_is_fifteen_lines() -> None:
    code = readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) == 15
    assert code == EXAMPLE  # this copy and the page's stay the same


async def test_the_example_streams_a_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        model.enqueue(Answer(text="It is an ACP agent.", reasoning="thinking"))
        code = readme_example().replace("http://127.0.0.1:4170", served.url).replace("/path/to/project", "/tmp")
        code = code.replace("anyio.run(main)", "")
        namespace: dict[str, Any] = {}
        exec(compile(code, "docs/sdk.md", "exec"), namespace)
        await namespace["main"]()
    assert capsys.readouterr().out == "It is an ACP agent.\n[end_turn]\n"
