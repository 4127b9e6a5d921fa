"""Command line: ``acp-server`` (stdio agent), ``acp-server ask TEXT``, ``acp-server serve`` (HTTP daemon)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any

import anyio

from .. import __version__
from ..collector import paused_for_imports
from ..config import (
    OPTIONS,
    SECRET_OPTIONS,
    ServeSettings,
    Settings,
    add_common_options,
    add_serve_options,
    serve_settings_from_args,
    settings_from_args,
    store_password,
    was_given,
)
from ..modes import ASK_MODE, BYPASS_MODE, MODES, READ_ONLY_MODE, tokenless_problem
from ._config_commands import CONFIG_COMMANDS, add_config_commands, run_config_command
from ._logging import configure_logging
from ._secrets import hide_secrets

__all__ = ["main"]

_DESCRIPTION = "ACP agent server: speaks the Agent Client Protocol (JSON-RPC over stdio) to an editor."


class _Parser(argparse.ArgumentParser):
    """The top parser: its help ends with the sandbox mechanism of this host (probed only when help is shown)."""

    def format_help(self) -> str:
        from ..tools import sandbox_support

        support = sandbox_support()
        offered = "offered" if support.mechanism else "not offered"
        self.epilog = f"sandbox mode: {offered} — {support.detail}"
        return super().format_help()


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="acp-server", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    add_common_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="{ask,serve,setup,config}")
    ask = commands.add_parser("ask", help="ask one question from the shell (spawns the agent over pipes)")
    add_common_options(ask, subcommand=True)
    ask.add_argument(
        "--persist",
        action="store_true",
        help="store the question and answer as a session of the current directory (default: not stored)",
    )
    ask.add_argument(
        "--mode",
        choices=list(MODES),
        default=ASK_MODE,
        help=f"the session's mode: {ASK_MODE} (default: the model may read and search only), default (asks y/N "
        "before each edit or command on a terminal; declines when stdin is not one), accept-edits, "
        "bypass-permissions",
    )
    ask.add_argument(
        "--mcp-config",
        metavar="FILE",
        help='MCP servers for the session, in the JSON editors use: {"mcpServers": {"name": {"command": ..., '
        '"args": [...], "env": {...}}}} (or {"type": "http", "url": ..., "headers": {...}})',
    )
    ask.add_argument("text", help="the prompt; - reads it from stdin")
    serve = commands.add_parser("serve", help="run the HTTP daemon (REST + SSE) over the same session bridge")
    add_common_options(serve, subcommand=True)
    add_serve_options(serve)
    parser.set_defaults(serve_parser=serve)
    add_config_commands(commands)
    return parser


def _child_args(args: argparse.Namespace) -> list[str]:
    """Flags to forward to the spawned agent; the API key and the store URL travel in the environment, never on a
    command line."""
    forwarded: list[str] = []
    for option in OPTIONS:
        value = getattr(args, option.dest, None)
        if value is None or option in SECRET_OPTIONS:
            continue  # a secret travels in the environment (see main)
        forwarded += [option.flag] if option.parse is None else [option.flag, str(value)]
    for flag in ("config", "profile"):  # the child reads the same configuration file
        if getattr(args, flag, None):
            forwarded += [f"--{flag}", str(getattr(args, flag))]
    if args.debug:
        forwarded.append("--debug")
    return forwarded


TTY_HINT = """\
acp-server: this is an Agent Client Protocol agent: an editor (Zed, JetBrains IDEs, ...) starts it and speaks
  JSON-RPC to it on stdin/stdout. To try it from a shell:  acp-server ask --offline "hello"
  (or with your model: acp-server ask --base-url http://localhost:11434/v1 --model NAME "hello"; to choose and
  check one for good: acp-server setup).
  Serving on stdin anyway; Ctrl-D quits.
"""
"""What a person who starts ``acp-server`` bare on a terminal sees on stderr (the agent keeps serving)."""


def _ask_args(args: argparse.Namespace, settings: Settings) -> tuple[Settings, list[str]]:
    """``ask`` is quiet unless asked (WARNING, not INFO) and stores nothing unless ``--persist``."""
    child = _child_args(args)
    if not was_given(args, "log_level") and not args.debug:
        settings = replace(settings, log_level="WARNING")
        child += ["--log-level", "WARNING"]
    if not args.persist and "--no-persist" not in child:
        child.append("--no-persist")
    if args.mode == BYPASS_MODE and "--allow-bypass-permissions" not in child:
        child.append("--allow-bypass-permissions")  # asked for on the user's own command line
    return settings, child


def _mcp_config(parser: argparse.ArgumentParser, path: str | None) -> list[dict[str, Any]]:
    """The ACP ``mcpServers`` of an editor's MCP configuration file (none without one); a bad file exits 2."""
    if path is None:
        return []
    from ..errors import InvalidInputError
    from ..mcp import editor_config_servers

    try:
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
        return [server.to_acp() for server in editor_config_servers(config)]
    except OSError as exc:
        parser.error(f"--mcp-config {path}: {exc.strerror or exc}")
    except ValueError as exc:
        parser.error(f"--mcp-config {path}: not JSON ({exc})")
    except InvalidInputError as exc:
        parser.error(f"--mcp-config {path}: {exc}")


def main(argv: Sequence[str] | None = None) -> int:
    hide_secrets([o.env for o in SECRET_OPTIONS if o.env], [o.flag for o in SECRET_OPTIONS])  # first: see _secrets
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in CONFIG_COMMANDS:
        return run_config_command(args)
    settings: Settings = settings_from_args(parser, args)
    if args.command == "ask":
        if args.persist and settings.no_persist:
            parser.error("ask: --persist and --no-persist contradict each other")
        settings, child_args = _ask_args(args, settings)
    secrets = [settings.api_key or "", store_password(settings.store)]
    configure_logging(settings.log_level, settings.log_file, secrets=secrets)
    if args.command == "ask":
        from ._ask import ask

        servers = _mcp_config(parser, args.mcp_config)
        text = sys.stdin.read() if args.text == "-" else args.text
        env = dict(os.environ)
        if settings.api_key:
            env["OPENAI_API_KEY"] = settings.api_key
        if settings.store:
            env["ACP_SERVER_STORE"] = settings.store
        try:
            return anyio.run(ask, text, child_args, env, args.mode, servers)
        except KeyboardInterrupt:
            return 130
    if args.command == "serve":
        return _serve(args.serve_parser, args, settings)
    with paused_for_imports():
        from ._endpoint import ConfigurationGate
        from ._stdio import run_stdio

    if sys.stdin.isatty():
        sys.stderr.write(TTY_HINT)
        sys.stderr.flush()

    return _run_or_exit_1(run_stdio, settings, None, None, ConfigurationGate(args, settings))


def _store_start_error(exc: BaseException) -> BaseException | None:
    """The :class:`StoreStartError` that ended a run (task groups wrap it), or None."""
    from ._stdio import StoreStartError

    if isinstance(exc, StoreStartError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _store_start_error(inner)) is not None:
                return found
    return None


def event_loop_options() -> dict[str, Any]:
    """The agent's event loop (stdio and ``serve``): uvloop where it is installed (a dependency on Linux and macOS:
    a chunk's socket reads, writes and wake-ups run in C, for less CPU per chunk and shorter loop stalls under
    load), asyncio's own elsewhere."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def _run_or_exit_1(run: Callable[..., Coroutine[Any, Any, int]], *args: Any) -> int:
    """``anyio.run(run, *args)`` on :func:`event_loop_options`' loop: Ctrl-C is exit 0; a store that cannot be used at
    start is its one line on stderr and exit 1 (no traceback)."""
    try:
        return anyio.run(run, *args, backend_options=event_loop_options())
    except KeyboardInterrupt:
        return 0
    except BaseException as exc:
        failure = _store_start_error(exc)
        if failure is None:
            raise
        sys.stderr.write(f"acp-server: {failure}\n")
        return 1


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace, settings: Settings) -> int:
    """``acp-server serve``: usage errors (a public address without a token included) exit 2 before anything
    starts; an address that cannot be bound exits 1. The sessions' modes are :func:`daemon_modes`: without a token
    only ``read-only`` (asking for another default mode, or for bypass, is a usage error)."""
    with paused_for_imports():
        from ..daemon import ListenError, bind_socket, daemon_modes, run_daemon
        from ._stdio import open_bridge

    serve: ServeSettings = serve_settings_from_args(parser, args)
    modes = daemon_modes(
        token=serve.token,
        allow_bypass_permissions=settings.allow_bypass_permissions,
        sandbox=settings.sandbox_available(),
    )
    if not serve.token:  # the safe default: a tokenless (loopback) daemon only reads and searches
        asked = settings.default_mode if was_given(args, "default_mode") else None
        problem = tokenless_problem(default_mode=asked, allow_bypass=settings.allow_bypass_permissions)
        if problem is not None:
            parser.error(problem)
        settings = replace(settings, default_mode=READ_ONLY_MODE)
    try:
        options = settings.daemon_options(serve)
    except ValueError as exc:
        parser.error(str(exc))
    secrets = [settings.api_key or "", serve.token or "", store_password(settings.store)]
    configure_logging(settings.log_level, settings.log_file, secrets=secrets)
    try:
        sock = bind_socket(options.host, options.port)  # before the model starts: a busy port fails fast
    except ListenError as exc:
        sys.stderr.write(f"acp-server serve: {exc}\n")
        return 1

    async def run() -> int:
        async with open_bridge(settings, modes=modes) as bridge:
            return await run_daemon(bridge, options, sock=sock)

    try:
        return _run_or_exit_1(run)
    finally:
        sock.close()
