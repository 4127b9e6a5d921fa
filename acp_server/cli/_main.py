"""Command line: ``acp-server`` (stdio agent), ``acp-server ask TEXT``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import anyio

from .. import __version__
from ..config import OPTIONS, Settings, add_common_options, settings_from_args
from ._logging import configure_logging

__all__ = ["main"]

_DESCRIPTION = "ACP agent server: speaks the Agent Client Protocol (JSON-RPC over stdio) to an editor."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acp-server", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    add_common_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="{ask}")
    ask = commands.add_parser("ask", help="ask one question from the shell (spawns the agent over pipes)")
    add_common_options(ask, subcommand=True)
    ask.add_argument("text", help="the prompt; - reads it from stdin")
    return parser


def _child_args(args: argparse.Namespace) -> list[str]:
    """Flags to forward to the spawned agent; the API key travels in the environment, never on a command line."""
    forwarded: list[str] = []
    for option in OPTIONS:
        value = getattr(args, option.dest, None)
        if value is None or option.dest == "api_key":
            continue
        forwarded += [option.flag] if option.parse is None else [option.flag, str(value)]
    if args.debug:
        forwarded.append("--debug")
    return forwarded


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    settings: Settings = settings_from_args(parser, args)
    configure_logging(settings.log_level, settings.log_file, secrets=[settings.api_key or ""])
    if args.command == "ask":
        from ._ask import ask

        text = sys.stdin.read() if args.text == "-" else args.text
        env = dict(os.environ)
        if settings.api_key:
            env["OPENAI_API_KEY"] = settings.api_key
        try:
            return anyio.run(ask, text, _child_args(args), env)
        except KeyboardInterrupt:
            return 130
    from ._agent import run_stdio

    try:
        return anyio.run(run_stdio, settings)
    except KeyboardInterrupt:
        return 0
