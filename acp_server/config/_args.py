"""The command line, the environment and the configuration file resolved into settings: flag > environment variable
> configuration file > default.

Invariant: this is the one place that reads the settings' environment variables; an invalid value is a usage error
(exit 2 through ``parser.error``) naming the flag, variable or file line (a secret's value shown as ``***``),
nothing started.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..modes import BYPASS_MODE
from ._file import (
    CONFIG_ENV,
    PROFILE_ENV,
    ConfigFile,
    ConfigFileError,
    default_config_path,
    load_config,
    locate_config,
)
from ._options import OPTIONS, SERVE_OPTIONS, Option
from ._parsers import boolean
from ._secrets import SECRETS
from ._settings import ServeSettings, Settings

__all__ = [
    "SettingsError",
    "add_common_options",
    "add_serve_options",
    "config_file",
    "resolve_settings",
    "serve_settings_from_args",
    "setting_sources",
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
        "--config",
        dest="config",
        default=default,
        metavar="FILE",
        help=f"the configuration file (default: ${CONFIG_ENV}, else $XDG_CONFIG_HOME/acp-server/config.toml)",
    )
    parser.add_argument(
        "--profile",
        dest="profile",
        default=default,
        metavar="NAME",
        help=f"use the file's [profiles.NAME] over its top level (default: ${PROFILE_ENV})",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help="same as --log-level DEBUG",
    )


def _given(
    option: Option, args: argparse.Namespace, env: Mapping[str, str], file: ConfigFile | None = None
) -> tuple[Any, str] | None:
    """The raw value asked for and where it came from (its flag, else its non-empty variable, else the
    configuration file's key); None: not given."""
    raw = getattr(args, option.dest, None)
    if raw is not None:
        return raw, option.flag
    if option.env is not None and env.get(option.env, "") != "":
        return env[option.env], option.env
    if file is not None and option.dest in file.values:
        value = file.values[option.dest]
        return value.raw, value.source
    return None


class SettingsError(ValueError):
    """A setting cannot be used: the message names the flag, variable or file line (a secret shown as ``***``)."""


def config_file(args: argparse.Namespace, env: Mapping[str, str]) -> ConfigFile:
    """The configuration file of ``args`` (``--config`` / ``--profile``, else their variables, else the default
    path), read once per namespace. Raises :class:`ConfigFileError`."""
    cached = getattr(args, "_config_file", None)
    if isinstance(cached, ConfigFile):
        return cached
    path, required = locate_config(getattr(args, "config", None), env)
    profile = getattr(args, "profile", None) or env.get(PROFILE_ENV, "") or None
    loaded = load_config(path, required=required, profile=profile)
    args._config_file = loaded
    return loaded


def _resolve(
    args: argparse.Namespace, env: Mapping[str, str], options: Sequence[Option], file: ConfigFile
) -> dict[str, Any]:
    """Flag > environment > configuration file > default for each option; an invalid value is a
    :class:`SettingsError`."""
    values: dict[str, Any] = {}
    for option in options:
        given = _given(option, args, env, file)
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
            raise SettingsError(f"invalid value for {source}: {shown} ({exc})") from None
    return values


def resolve_settings(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Settings:
    """Flags, environment and configuration file resolved into :class:`Settings`, re-readable at any time (the
    ``authenticate`` of the stdio agent re-reads the file); raises :class:`SettingsError` on a usage error."""
    env = os.environ if env is None else env
    try:
        file = config_file(args, env)
    except ConfigFileError as exc:
        raise SettingsError(str(exc)) from None
    values = _resolve(args, env, OPTIONS, file)
    if getattr(args, "debug", False):
        values["log_level"] = "DEBUG"
    if values.get("max_pending_prompts_per_session") == 0:
        values["max_pending_prompts_per_session"] = None
    if values.get("default_mode") == BYPASS_MODE and not values.get("allow_bypass_permissions"):
        raise SettingsError(f"--default-mode {BYPASS_MODE} needs --allow-bypass-permissions")
    values["user_config_dir"] = str(default_config_path(env).parent)
    return Settings(**values)


def settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> Settings:
    """Resolve flags, environment and configuration file into :class:`Settings`; an invalid value exits via
    ``parser.error`` (exit 2)."""
    try:
        return resolve_settings(args, env)
    except SettingsError as exc:
        parser.error(str(exc))


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Add the flags of ``acp-server serve`` (raw strings, resolved by :func:`serve_settings_from_args`)."""
    for option in SERVE_OPTIONS:
        parser.add_argument(option.flag, dest=option.dest, default=None, help=option.help, metavar=option.metavar)


def serve_settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> ServeSettings:
    """Resolve the serve flags and environment into :class:`ServeSettings` (exit 2 on an invalid value)."""
    env = os.environ if env is None else env
    try:
        return ServeSettings(**_resolve(args, env, SERVE_OPTIONS, config_file(args, env)))
    except (SettingsError, ConfigFileError) as exc:
        parser.error(str(exc))


def was_given(args: argparse.Namespace, dest: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the setting ``dest`` was asked for, by its flag, its (non-empty) environment variable or the
    configuration file, rather than left to its default: the same test :func:`settings_from_args` applies before
    it parses a value (a file that cannot be read counts as giving nothing: its error is the resolution's)."""
    option = next(o for o in (*OPTIONS, *SERVE_OPTIONS) if o.dest == dest)
    env = os.environ if env is None else env
    try:
        file: ConfigFile | None = config_file(args, env)
    except ConfigFileError:
        file = None
    return _given(option, args, env, file) is not None


def setting_sources(
    args: argparse.Namespace, env: Mapping[str, str] | None = None, *, serve: bool = False
) -> list[tuple[Option, str, str]]:
    """Each setting's effective raw value (a secret as ``***``, a default as ``-``) and where it came from (its
    flag, its variable, ``FILE:LINE: key``, or ``default``): what ``acp-server config show`` prints. Raises
    :class:`SettingsError` when the settings cannot be resolved (as the agent would refuse them)."""
    env = os.environ if env is None else env
    resolve_settings(args, env)  # the same checks as a start
    file = config_file(args, env)
    rows: list[tuple[Option, str, str]] = []
    for option in (*OPTIONS, *SERVE_OPTIONS) if serve else OPTIONS:
        given = _given(option, args, env, file)
        if given is None:
            rows.append((option, "-", "default"))
            continue
        raw, source = given
        shown = "***" if option.dest in SECRETS else ("true" if raw is True else "false" if raw is False else raw)
        rows.append((option, str(shown), source))
    return rows
