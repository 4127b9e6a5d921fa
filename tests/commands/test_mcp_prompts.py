"""A session's MCP servers' prompts as slash commands at the bridge (every face's prompts pass here), with the real
test server (``tests/mcp_servers/py_server.py``, official ``mcp`` SDK) over real pipes: offered per session after
the built-ins, listed by ``/help``, run through the normal turn with their arguments, bad arguments and a silent
server answered without the model, a cancel during ``prompts/get``, the listeners told of a changed list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.domain import Prompt, ResourceLinkPart, TextPart
from acp_server.mcp import McpSettings, parse_mcp_servers
from tests.bridge._support import read_all
from tests.mcp.test_servers import call, eventually, py_server

from .test_slash import ModelRunner, run, said, text

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def session_with_server(
    tmp_path: Path, runner: ModelRunner, settings: McpSettings | None = None
) -> AsyncIterator[tuple[SessionBridge, SessionEntry]]:
    mcp = settings or McpSettings(connect_timeout_s=30)
    async with SessionBridge(runner, mcp=mcp) as bridge:
        with anyio.fail_after(40):
            entry = await bridge.open_session(str(tmp_path), mcp_servers=parse_mcp_servers([py_server()]))
        yield bridge, entry


async def test_a_session_offers_its_servers_prompts_after_the_builtins_and_help_lists_them(tmp_path: Path) -> None:
    runner = ModelRunner()
    async with session_with_server(tmp_path, runner) as (bridge, entry):
        commands = bridge.commands_of(entry)
        assert commands[: len(bridge.commands)] == bridge.commands
        review = next(command for command in commands if command.name == "mcp__py__review")
        assert (review.description, review.hint) == ("Review a piece of code. (MCP server 'py')", "code [style]")
        other = bridge.create_session(str(tmp_path))  # no servers: the built-ins only
        assert bridge.commands_of(other) == bridge.commands
        shown = await run(bridge, entry.session_id, text("/help"))
        assert "- /mcp__py__review <code [style]>: Review a piece of code. (MCP server 'py')" in shown
        assert runner.prompts == []


async def test_a_prompt_command_sends_what_the_server_gives_through_the_normal_turn(tmp_path: Path) -> None:
    runner = ModelRunner()
    async with session_with_server(tmp_path, runner) as (bridge, entry):
        link = ResourceLinkPart("file:///p/a.py", "a.py")
        prompt = Prompt((TextPart("/mcp__py__review 'x = 1' style=strict"), link))
        assert await run(bridge, entry.session_id, prompt) == "model"
    [asked] = runner.prompts
    assert asked.parts == (TextPart("Review this code (strict):\nx = 1"), link)  # the user's other parts follow


async def test_bad_arguments_and_a_silent_server_answer_the_user_without_the_model(tmp_path: Path) -> None:
    runner = ModelRunner()
    settings = McpSettings(connect_timeout_s=30, call_timeout_s=1)
    async with session_with_server(tmp_path, runner, settings) as (bridge, entry):
        sid = entry.session_id
        assert await run(bridge, sid, text("/mcp__py__review style=long")) == (
            "/mcp__py__review needs the argument 'code' (usage: /mcp__py__review code [style], or name=value for "
            "any argument)."
        )
        assert await run(bridge, sid, text("/mcp__py__review x colour=red")) == (
            "/mcp__py__review has no argument 'colour' (its arguments: code, style)."
        )
        assert await run(bridge, sid, text("/mcp__py__slow")) == (
            "/mcp__py__slow failed: the MCP server 'py' did not answer within 1 s; the request was cancelled."
        )
        assert runner.prompts == []
        assert entry.conversation.messages == []
        assert await run(bridge, sid, text("/mcp__py__nothing here")) == "model"  # not a prompt: text for the model


async def test_a_cancel_during_prompts_get_ends_the_prompt_cancelled_and_reaches_the_server(tmp_path: Path) -> None:
    runner = ModelRunner()
    async with session_with_server(tmp_path, runner) as (bridge, entry):
        handle = bridge.send_prompt(entry.session_id, text("/mcp__py__slow"))
        await eventually((tmp_path / "prompt_started.txt").exists)
        handle.cancel()
        events = await read_all(handle.events)
        assert await handle.result() == "cancelled"
        assert said(events) == ""
        await eventually((tmp_path / "prompt_cancelled.txt").exists)
    assert runner.prompts == []


async def test_the_commands_listeners_hear_a_changed_prompt_list(tmp_path: Path) -> None:
    heard: list[SessionEntry] = []
    changed = anyio.Event()
    async with session_with_server(tmp_path, ModelRunner()) as (bridge, entry):

        def listener(session: SessionEntry) -> None:
            heard.append(session)
            changed.set()

        bridge.add_commands_listener(listener)
        assert "mcp__py__late" not in {command.name for command in bridge.commands_of(entry)}
        await call(entry.tools, "mcp__py__add_prompt")
        with anyio.fail_after(20):
            await changed.wait()
        assert heard[0] is entry
        assert "mcp__py__late" in {command.name for command in bridge.commands_of(entry)}


async def test_servers_replaced_without_prompts_take_theirs_away_and_the_listeners_hear_it(tmp_path: Path) -> None:
    heard: list[SessionEntry] = []
    async with session_with_server(tmp_path, ModelRunner()) as (bridge, entry):
        bridge.add_commands_listener(heard.append)
        assert bridge.commands_of(entry) != bridge.commands
        with anyio.fail_after(30):
            await bridge.resume_session(entry.session_id, mcp_servers=[])  # the client now passes none
        assert heard == [entry]
        assert bridge.commands_of(entry) == bridge.commands
