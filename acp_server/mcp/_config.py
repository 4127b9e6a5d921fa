"""The MCP servers a session connects to, as ACP's ``mcpServers`` describes them, and how a stdio server is started.

One shape for every face (ACP ``session/new``/``load``/``resume``/``fork``, the daemon's ``POST /session``, ``ask
--mcp-config``): a list of ``{name, command, args, env: [{name, value}]}`` (stdio), ``{type: "http", name, url,
headers: [{name, value}]}`` (Streamable HTTP) or ``{type: "sse", ...}`` (the deprecated HTTP+SSE transport).
Invalid input is one :class:`InvalidInputError` naming the field; nothing is started. A stdio server's environment
is the agent's own, minus the agent's secrets, with the given ``env`` on top.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..errors import InvalidInputError
from ..tools import SECRET_ENV

__all__ = [
    "AGENT_SECRETS",
    "MAX_MCP_SERVERS",
    "McpServerConfig",
    "Transport",
    "editor_config_servers",
    "parse_mcp_servers",
    "server_environment",
]

Transport: TypeAlias = Literal["stdio", "http", "sse"]

MAX_MCP_SERVERS = 32
"""Servers one session may connect to."""

AGENT_SECRETS = tuple(sorted(SECRET_ENV))
"""The agent's own secrets: never in a stdio server's environment (unless the client passes them itself)."""

_MAX_NAME = 64
_MAX_TEXT = 32 * 1024
_MAX_ITEMS = 256


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One server: ``name`` (unique in the session), its transport, and for stdio ``command``/``args``/``env``, for
    HTTP ``url``/``headers``. ``env`` and ``headers`` may hold secrets: never logged (``repr`` leaves them out)."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        where = self.command if self.transport == "stdio" else self.url.partition("?")[0]  # a query may hold a key
        return f"<McpServerConfig {self.name!r} {self.transport} {where!r}>"

    def to_acp(self) -> dict[str, Any]:
        """The ACP wire shape of this server (what :func:`parse_mcp_servers` reads)."""
        if self.transport == "stdio":
            env = [{"name": key, "value": value} for key, value in self.env]
            return {"name": self.name, "command": self.command, "args": list(self.args), "env": env}
        headers = [{"name": key, "value": value} for key, value in self.headers]
        return {"type": self.transport, "name": self.name, "url": self.url, "headers": headers}


def _refuse(field: str, problem: str) -> InvalidInputError:
    return InvalidInputError.for_field(field, problem, f"Invalid params: {field}: {problem}")


def _text(value: object, field: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _refuse(field, "must be a string")
    if len(value) > _MAX_TEXT or "\x00" in value or (not empty and not value):
        raise _refuse(field, f"must be a {'non-empty ' if not empty else ''}string of at most {_MAX_TEXT} characters")
    return value


def _pairs(value: object, field: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > _MAX_ITEMS:
        raise _refuse(field, f"must be a list of at most {_MAX_ITEMS} {{name, value}} objects")
    pairs: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _refuse(f"{field}.{i}", "must be an object {name, value}")
        name = _text(item.get("name"), f"{field}.{i}.name", empty=False)
        if "=" in name and field.endswith("env"):
            raise _refuse(f"{field}.{i}.name", "must not contain '='")
        pairs.append((name, _text(item.get("value"), f"{field}.{i}.value")))
    return tuple(pairs)


def _server(item: object, field: str) -> McpServerConfig:
    if not isinstance(item, Mapping):
        raise _refuse(field, "must be an object")
    name = _text(item.get("name"), f"{field}.name", empty=False)
    if len(name) > _MAX_NAME or not name.isprintable():
        raise _refuse(f"{field}.name", f"must be printable, at most {_MAX_NAME} characters")
    kind = item.get("type", "stdio" if "command" in item else None)
    if kind == "stdio":
        command = _text(item.get("command"), f"{field}.command", empty=False)
        raw_args = item.get("args", [])
        if not isinstance(raw_args, list) or len(raw_args) > _MAX_ITEMS:
            raise _refuse(f"{field}.args", f"must be a list of at most {_MAX_ITEMS} strings")
        args = tuple(_text(arg, f"{field}.args.{i}") for i, arg in enumerate(raw_args))
        return McpServerConfig(name, "stdio", command=command, args=args, env=_pairs(item.get("env"), f"{field}.env"))
    if kind in ("http", "sse"):
        url = _text(item.get("url"), f"{field}.url", empty=False)
        if not url.startswith(("http://", "https://")):
            raise _refuse(f"{field}.url", "must be an http:// or https:// URL")
        headers = _pairs(item.get("headers"), f"{field}.headers")
        return McpServerConfig(name, "http" if kind == "http" else "sse", url=url, headers=headers)
    raise _refuse(f"{field}.type", "must be 'http' or 'sse' (or absent, with 'command', for a stdio server)")


def parse_mcp_servers(value: object, field: str = "mcpServers") -> tuple[McpServerConfig, ...]:
    """The servers of an ``mcpServers`` list (None: none); names must be unique."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_MCP_SERVERS:
        raise _refuse(field, f"must be a list of at most {MAX_MCP_SERVERS} servers")
    servers = tuple(_server(item, f"{field}.{i}") for i, item in enumerate(value))
    names = [server.name for server in servers]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise _refuse(f"{field}.{i}.name", f"duplicate server name {name!r}")
    return servers


def editor_config_servers(config: object) -> tuple[McpServerConfig, ...]:
    """The servers of an editor's MCP configuration file: ``{"mcpServers": {"name": {"command", "args", "env":
    {KEY: VALUE}}}}`` (or ``{"type": "http"|"sse", "url", "headers": {KEY: VALUE}}``)."""
    if not isinstance(config, Mapping) or not isinstance(config.get("mcpServers"), Mapping):
        raise _refuse("mcpServers", 'the file must hold an object {"mcpServers": {"name": {...}}}')
    servers: list[dict[str, Any]] = []
    for name, entry in config["mcpServers"].items():
        if not isinstance(entry, Mapping):
            raise _refuse(f"mcpServers.{name}", "must be an object")
        item: dict[str, Any] = {key: value for key, value in entry.items() if key not in ("env", "headers")}
        item["name"] = name
        for key in ("env", "headers"):
            pairs = entry.get(key)
            if isinstance(pairs, Mapping):
                item[key] = [{"name": k, "value": v} for k, v in pairs.items()]
            elif pairs is not None:
                item[key] = pairs
        servers.append(item)
    return parse_mcp_servers(servers)


def server_environment(server: McpServerConfig, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A stdio server's environment: ``base`` (the agent's environment) without :data:`AGENT_SECRETS`, the
    server's ``env`` on top."""
    env = {key: value for key, value in (os.environ if base is None else base).items() if key not in AGENT_SECRETS}
    env.update(server.env)
    return env
