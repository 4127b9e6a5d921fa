"""The command line and the environment resolved into settings: flag > environment variable > default.

Invariant: this is the one place that reads the settings' environment variables; an invalid value is a usage error
(exit 2 through ``parser.error``) naming the flag or variable (a secret's value shown as ``***``), nothing started.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..modes import BYPASS_MODE
from ._options import OPTIONS, SERVE_OPTIONS, Option
from ._parsers import boolean
from ._secrets import SECRETS
from ._settings import ServeSettings, Settings

__all__ = [
    "add_common_options",
    "add_serve_options",
    "serve_settings_from_args",
    "settings_from_args",
    "was_given",
]


def add_common_options(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """Add every setting's flag; values stay raw strings so flag and env errors are reported the same way.

    On a subcommand the defaults are suppressed, so ``acp-server --offline ask …`` keeps the flag given before it.
    Abbreviated flags are off: ``ask --mode`` would be ambiguous with ``--model`` / ``--models`` (and an
    abbreviation that works today would break the day a longer flag is added).
    """
    parser.allow_abbrev = False
    default = argparse.SUPPRESS if subcommand else None
    for option in OPTIONS:
        if option.parse is None:
            parser.add_argument(option.flag, dest=option.dest, action="store_true", default=default, help=option.help)
        else:
            parser.add_argument(
                option.flag, dest=option.dest, default=default, help=option.help, metavar=option.metavar
            )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help="same as --log-level DEBUG",
    )


def _given(option: Option, args: argparse.Namespace, env: Mapping[str, str]) -> tuple[Any, str] | None:
    """The raw value asked for and where it came from (its flag, else its non-empty variable); None: not given."""
    raw = getattr(args, option.dest, None)
    if raw is not None:
        return raw, option.flag
    if option.env is not None and env.get(option.env, "") != "":
        return env[option.env], option.env
    return None


def _resolve(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str], options: Sequence[Option]
) -> dict[str, Any]:
    """Flag > environment > default for each option; an invalid value exits via ``parser.error`` (exit 2)."""
    values: dict[str, Any] = {}
    for option in options:
        given = _given(option, args, env)
        if given is None:
            continue
        raw, source = given
        if option.parse is None and isinstance(raw, bool):
            values[option.dest] = raw
            continue
        try:
            values[option.dest] = (option.parse or boolean)(raw)
        except ValueError as exc:
            shown = "***" if option.dest in SECRETS else repr(raw)
            parser.error(f"invalid value for {source}: {shown} ({exc})")
    return values


def settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> Settings:
    """Resolve flags and environment into :class:`Settings`; an invalid value exits via ``parser.error`` (exit 2)."""
    values = _resolve(parser, args, os.environ if env is None else env, OPTIONS)
    if getattr(args, "debug", False):
        values["log_level"] = "DEBUG"
    if values.get("max_pending_prompts_per_session") == 0:
        values["max_pending_prompts_per_session"] = None
    if values.get("default_mode") == BYPASS_MODE and not values.get("allow_bypass_permissions"):
        parser.error(f"--default-mode {BYPASS_MODE} needs --allow-bypass-permissions")
    return Settings(**values)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Add the flags of ``acp-server serve`` (raw strings, resolved by :func:`serve_settings_from_args`)."""
    for option in SERVE_OPTIONS:
        parser.add_argument(option.flag, dest=option.dest, default=None, help=option.help, metavar=option.metavar)


def serve_settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> ServeSettings:
    """Resolve the serve flags and environment into :class:`ServeSettings` (exit 2 on an invalid value)."""
    return ServeSettings(**_resolve(parser, args, os.environ if env is None else env, SERVE_OPTIONS))


def was_given(args: argparse.Namespace, dest: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the setting ``dest`` was asked for, by its flag or its (non-empty) environment variable, rather than
    left to its default: the same test :func:`settings_from_args` applies before it parses a value."""
    option = next(o for o in (*OPTIONS, *SERVE_OPTIONS) if o.dest == dest)
    return _given(option, args, os.environ if env is None else env) is not None
