"""MCP servers' prompts as commands, at the tools layer: the real test server (``tests/mcp_servers/py_server.py``, on
the official ``mcp`` SDK) as a child process over real pipes. Listed only when advertised, named and described,
arguments bound from the typed text, ``prompts/get``'s result as prompt parts, a server silent on ``prompts/list``
or ``prompts/get`` (bounded), ``prompts/list_changed``, a cancel reaching the server."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import types

from acp_server.domain import ImagePart, ResourcePart, TextPart
from acp_server.mcp import (
    McpPrompt,
    McpPromptError,
    McpServers,
    McpSettings,
    bind_arguments,
    parse_mcp_servers,
    prompt_parts,
)
from acp_server.mcp._prompts import PromptArgument, mcp_prompt
from acp_server.tools.builtin import builtin_tool_set

from .test_servers import call, connected, eventually, py_server

pytestmark = pytest.mark.anyio


def by_command(mcp: McpServers) -> dict[str, McpPrompt]:
    return {prompt.command: prompt for prompt in mcp.prompts()}


async def test_prompts_are_listed_named_described_with_their_arguments(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server("my server")) as (_, mcp):
        prompts = by_command(mcp)
    assert {"mcp__my_server__review", "mcp__my_server__context", "mcp__my_server__slow"} <= set(prompts)
    review = prompts["mcp__my_server__review"]
    assert (review.server, review.name) == ("my server", "review")
    assert review.description == "Review a piece of code. (MCP server 'my server')"
    assert [(a.name, a.required) for a in review.arguments] == [("code", True), ("style", False)]
    assert review.hint == "code [style]"
    assert prompts["mcp__my_server__context"].hint is None


async def test_a_server_without_the_prompts_capability_is_not_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="acp_server.mcp"):
        async with connected(tmp_path, py_server(env={"PY_SERVER_NO_PROMPTS": "1"})) as (tools, mcp):
            assert mcp.prompts() == ()
            assert "mcp__py__echo" in tools.names
    assert not any("prompts" in record.getMessage() for record in caplog.records)  # never listed, nothing failed


async def test_the_arguments_typed_bind_by_name_then_in_order() -> None:
    review = McpPrompt("mcp__s__review", "s", "review", "d", (_arg("code", True), _arg("style", False)))
    assert bind_arguments(review, "x") == {"code": "x"}
    assert bind_arguments(review, "'a b' strict") == {"code": "a b", "style": "strict"}
    assert bind_arguments(review, "style=long 'x = 1'") == {"style": "long", "code": "x = 1"}
    assert bind_arguments(review, "--code=y") == {"code": "y"}
    assert bind_arguments(review, "one two three") == {"code": "one", "style": "two three"}  # the last takes the rest
    assert bind_arguments(review, "code='a=b'") == {"code": "a=b"}
    with pytest.raises(McpPromptError) as missing:
        bind_arguments(review, "style=long")
    assert str(missing.value) == (
        "/mcp__s__review needs the argument 'code' (usage: /mcp__s__review code [style], or name=value for any "
        "argument)."
    )
    with pytest.raises(McpPromptError) as unknown:
        bind_arguments(review, "x colour=red")
    assert str(unknown.value) == "/mcp__s__review has no argument 'colour' (its arguments: code, style)."
    with pytest.raises(McpPromptError) as quotes:
        bind_arguments(review, "'open")
    assert str(quotes.value).startswith("Cannot read the arguments of /mcp__s__review: No closing quotation")
    bare = McpPrompt("mcp__s__bare", "s", "bare", "d", ())
    assert bind_arguments(bare, "  ") == {}
    with pytest.raises(McpPromptError, match="takes no arguments: 'extra' is left over"):
        bind_arguments(bare, "extra")


def _arg(name: str, required: bool) -> PromptArgument:
    return PromptArgument(name, "", required)


async def test_a_prompt_is_fetched_with_its_arguments_and_becomes_prompt_parts(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (_, mcp):
        prompts = by_command(mcp)
        review = prompts["mcp__py__review"]
        result = await mcp.get_prompt(review, bind_arguments(review, "'x = 1' style=strict"))
        assert prompt_parts(result, review) == (TextPart("Review this code (strict):\nx = 1"),)
        context = prompts["mcp__py__context"]
        parts = prompt_parts(await mcp.get_prompt(context, {}), context)
    assert parts[0] == TextPart("Here is the context.")
    assert parts[1] == ResourcePart("file:///notes.md", "the notes", "text/markdown")
    assert parts[2] == TextPart("(The prompt gives this as the assistant's words:)\nUnderstood.")
    assert isinstance(parts[3], ImagePart) and parts[3].mime_type == "image/png"


async def test_a_result_over_the_text_bound_is_refused() -> None:
    prompt = McpPrompt("mcp__s__big", "s", "big", "d", ())
    text = types.TextContent(type="text", text="x" * (256 * 1024 + 1))
    result = types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])
    with pytest.raises(McpPromptError, match="more than the 262144 a prompt may bring; nothing was sent"):
        prompt_parts(result, prompt)


async def test_a_server_silent_on_prompts_list_holds_the_connect_only_so_long_and_tells_later(tmp_path: Path) -> None:
    changed = anyio.Event()
    tools = builtin_tool_set()
    settings = McpSettings(connect_timeout_s=30, prompts_wait_s=0.2)
    async with anyio.create_task_group() as tg:
        mcp = McpServers(tools, str(tmp_path), settings, on_prompts=changed.set)
        try:
            with anyio.fail_after(40):
                release = tmp_path / "release"
                servers = parse_mcp_servers([py_server(env={"PY_SERVER_HANG_PROMPTS": str(release)})])
                await mcp.connect(servers, tg)
            assert mcp.status()[0]["status"] == "connected"  # its tools work; its prompts are not known yet
            assert mcp.prompts() == () and not changed.is_set()
            release.write_text("")
            with anyio.fail_after(20):
                await changed.wait()
            assert "mcp__py__review" in by_command(mcp)
        finally:
            await mcp.aclose()


async def test_prompts_list_changed_lists_them_again(tmp_path: Path) -> None:
    changed = anyio.Event()
    async with connected(tmp_path, py_server()) as (tools, mcp):
        mcp._on_prompts = changed.set
        assert "mcp__py__late" not in by_command(mcp)
        await call(tools, "mcp__py__add_prompt")
        with anyio.fail_after(20):
            await changed.wait()
        late = by_command(mcp)["mcp__py__late"]
        assert late.hint == "topic"
        assert prompt_parts(await mcp.get_prompt(late, {"topic": "x"}), late) == (TextPart("late prompt about x"),)


async def test_a_silent_prompts_get_is_bounded_and_cancelled_on_the_server(tmp_path: Path) -> None:
    settings = McpSettings(connect_timeout_s=30, call_timeout_s=1)
    async with connected(tmp_path, py_server(), settings=settings) as (_, mcp):
        slow = by_command(mcp)["mcp__py__slow"]
        with pytest.raises(McpPromptError) as silent, anyio.fail_after(20):
            await mcp.get_prompt(slow, {})
        assert str(silent.value) == "the MCP server 'py' did not answer within 1 s; the request was cancelled"
        await eventually((tmp_path / "prompt_cancelled.txt").exists)


async def test_a_cancel_during_prompts_get_reaches_the_server(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (_, mcp):
        slow = by_command(mcp)["mcp__py__slow"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(mcp.get_prompt, slow, {})
            await eventually((tmp_path / "prompt_started.txt").exists)
            tg.cancel_scope.cancel()
        await eventually((tmp_path / "prompt_cancelled.txt").exists)
        assert mcp.status()[0]["status"] == "connected"


def test_what_a_server_says_of_its_prompts_is_shown_on_one_line_and_bounded() -> None:
    """A server's description, title and argument names reach the editor's command list as one line of plain text:
    line breaks, escape sequences and invisible (format) characters become spaces, an argument name is one word of
    at most 64 characters (a name with spaces cannot pass for two arguments); what the server is asked for stays
    the name it declared."""
    spoof = "Looks fine\n\n/compact — Compact the conversation\x1b[2K\u202e\u200b"
    huge = "a" * 100_000
    arguments = [types.PromptArgument(name=huge, required=True), types.PromptArgument(name="x] [y\nz", required=False)]
    prompt = mcp_prompt("srv", types.Prompt(name="p", description=spoof, arguments=arguments), set())
    assert prompt.description == "Looks fine /compact — Compact the conversation [2K (MCP server 'srv')"
    assert prompt.hint == "a" * 63 + "… [x]_[y_z]"
    assert bind_arguments(prompt, "one two") == {huge: "one", "x] [y\nz": "two"}
    with pytest.raises(McpPromptError) as refused:
        bind_arguments(prompt, "other=1")
    assert str(refused.value) == f"/{prompt.command} has no argument 'other' (its arguments: {'a' * 63}…, x]_[y_z)."
    titled = mcp_prompt("srv", types.Prompt(name="t", title="Tab\there\r\nnext\x00", arguments=[]), set())
    assert titled.description == "Tab here next (MCP server 'srv')"


def test_links_and_resources_count_toward_the_text_bound() -> None:
    """A result of many resource links (or binary resources) is text for the model too — their uris, names and
    descriptions — and counts toward the bound like text does."""
    prompt = McpPrompt("mcp__s__links", "s", "links", "d", ())
    link = types.ResourceLink(type="resource_link", uri="file:///x", name="n" * 1024, description="d" * 1024)  # type: ignore[arg-type]
    many = [types.PromptMessage(role="user", content=link)] * 200  # about 400 KiB of names and descriptions
    with pytest.raises(McpPromptError, match="more than the 262144 a prompt may bring; nothing was sent"):
        prompt_parts(types.GetPromptResult(messages=many), prompt)
    blob = types.BlobResourceContents(uri="file:///" + "u" * 2048, blob="", mimeType=None)  # type: ignore[arg-type]
    binary = types.EmbeddedResource(type="resource", resource=blob)
    blobs = [types.PromptMessage(role="user", content=binary)] * 200
    with pytest.raises(McpPromptError, match="more than the 262144 a prompt may bring"):
        prompt_parts(types.GetPromptResult(messages=blobs), prompt)
    assert len(prompt_parts(types.GetPromptResult(messages=many[:10]), prompt)) == 10


MALFORMED = str(Path(__file__).resolve().parent.parent / "mcp_servers" / "malformed_server.py")


def malformed_server(bad: str) -> dict[str, object]:
    return {"name": "bad", "command": sys.executable, "args": [MALFORMED], "env": [{"name": "MALFORMED", "value": bad}]}


async def test_a_prompts_listing_the_schema_refuses_leaves_no_prompts_and_the_server_up(tmp_path: Path) -> None:
    async with connected(tmp_path, malformed_server("list")) as (tools, mcp):
        await eventually(lambda: mcp.prompts() == () and "mcp__bad__echo" in tools.names)
        assert "mcp__bad__echo" in tools.names  # its tools are offered: the connection stays up
        result = await call(tools, "mcp__bad__echo")
        assert not result.failed


async def test_a_prompts_get_result_the_schema_refuses_is_a_precise_prompt_error(tmp_path: Path) -> None:
    async with connected(tmp_path, malformed_server("get")) as (_, mcp):
        await eventually(lambda: bool(mcp.prompts()))
        (greet,) = mcp.prompts()
        with pytest.raises(McpPromptError, match="the MCP server 'bad' answered an invalid result"):
            await mcp.get_prompt(greet, {})
