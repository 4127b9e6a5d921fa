"""MCP server configuration and tool naming, without a server: ACP's ``mcpServers`` and the editors' JSON file are
read or refused with the field named; a stdio server's environment drops the agent's secrets; names are valid for
OpenAI, unique and stable."""

from __future__ import annotations

import re

import pytest

from acp_server.errors import InvalidInputError
from acp_server.mcp import (
    AGENT_SECRETS,
    McpServerConfig,
    editor_config_servers,
    mcp_tool_name,
    parse_mcp_servers,
)
from acp_server.mcp._config import server_environment

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_the_three_transports_are_read() -> None:
    servers = parse_mcp_servers(
        [
            {"name": "fs", "command": "npx", "args": ["-y", "x"], "env": [{"name": "K", "value": "v"}]},
            {
                "type": "http",
                "name": "web",
                "url": "https://h/mcp",
                "headers": [{"name": "Authorization", "value": "t"}],
            },
            {"type": "sse", "name": "old", "url": "http://h/sse", "headers": []},
        ]
    )
    assert servers[0] == McpServerConfig("fs", "stdio", command="npx", args=("-y", "x"), env=(("K", "v"),))
    assert (servers[1].transport, servers[1].headers) == ("http", (("Authorization", "t"),))
    assert servers[2].transport == "sse"
    assert "Authorization" not in repr(servers[1]) and "'t'" not in repr(servers[1])  # secrets stay out of logs
    assert parse_mcp_servers([server.to_acp() for server in servers]) == servers
    assert parse_mcp_servers(None) == ()


@pytest.mark.parametrize(
    ("servers", "field"),
    [
        ({}, "mcpServers"),
        ([3], "mcpServers.0"),
        ([{"command": "x"}], "mcpServers.0.name"),
        ([{"name": "a", "command": ""}], "mcpServers.0.command"),
        ([{"name": "a", "command": "x", "args": "y"}], "mcpServers.0.args"),
        ([{"name": "a", "command": "x", "env": [{"name": "A=B", "value": ""}]}], "mcpServers.0.env.0.name"),
        ([{"name": "a", "command": "x", "env": [{"name": "A"}]}], "mcpServers.0.env.0.value"),
        ([{"name": "a", "type": "acp", "id": "x"}], "mcpServers.0.type"),
        ([{"name": "a", "type": "http", "url": "file:///x"}], "mcpServers.0.url"),
        ([{"name": "a", "command": "x"}, {"name": "a", "command": "y"}], "mcpServers.1.name"),
        ([{"name": "a", "command": "x"}] * 33, "mcpServers"),
    ],
)
def test_bad_servers_are_refused_naming_the_field(servers: object, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_mcp_servers(servers)
    assert caught.value.errors[0]["field"] == field


def test_the_editors_file_shape() -> None:
    config = {
        "mcpServers": {
            "db": {"command": "db-mcp", "args": ["--ro"], "env": {"DB_URL": "postgres://x"}},
            "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "k"}},
        }
    }
    db, web = editor_config_servers(config)
    assert (db.name, db.command, db.args, db.env) == ("db", "db-mcp", ("--ro",), (("DB_URL", "postgres://x"),))
    assert (web.transport, web.headers) == ("http", (("X-Key", "k"),))
    with pytest.raises(InvalidInputError):
        editor_config_servers({"servers": {}})


def test_a_stdio_servers_environment_has_the_given_env_on_top_and_never_the_agents_secrets() -> None:
    base = {"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "sk", "ACP_SERVER_TOKEN": "tok", "KEEP": "1"}
    server = McpServerConfig("s", "stdio", command="x", env=(("KEEP", "2"), ("NEW", "3")))
    env = server_environment(server, base)
    assert env == {"PATH": "/bin", "HOME": "/h", "KEEP": "2", "NEW": "3"}
    assert set(AGENT_SECRETS) == {"OPENAI_API_KEY", "ACP_SERVER_TOKEN", "ACP_SERVER_STORE"}
    given = McpServerConfig("s", "stdio", command="x", env=(("OPENAI_API_KEY", "the user's own"),))
    assert server_environment(given, base)["OPENAI_API_KEY"] == "the user's own"  # passed by the client itself


def test_tool_names_are_valid_unique_and_stable() -> None:
    assert mcp_tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert mcp_tool_name("my server", "do.it/now") == "mcp__my_server__do_it_now"
    long = mcp_tool_name("a-very-long-server-name-" * 3, "and-an-even-longer-tool-name-" * 3)
    assert VALID.match(long) and long == mcp_tool_name(
        "a-very-long-server-name-" * 3, "and-an-even-longer-tool-name-" * 3
    )
    first = mcp_tool_name("s", "a.b")
    second = mcp_tool_name("s", "a/b", taken={first})
    assert first == "mcp__s__a_b" and second != first and VALID.match(second)
    assert second == mcp_tool_name("s", "a/b", taken={first})  # the same inputs, the same name
    for server, tool in (("ü", "ß"), ("x" * 100, "y"), ("", "t")):
        assert VALID.match(mcp_tool_name(server, tool))
