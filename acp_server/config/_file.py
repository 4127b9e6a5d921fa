"""The configuration file: TOML whose keys are the flags' names, the layer below the environment.

Invariants: every key is a flag of the one table of options (``_options.py``) without its dashes (``base-url``,
``api-key``, ``model``...), its value of the type the flag takes (text, a whole number, ``true``/``false`` for a
switch, a list of text or comma-separated text for a list); a ``[profiles.NAME]`` table holds the same keys and,
with ``--profile NAME``, wins over the top level. A malformed file, an unknown key, a value of the wrong type or an
unknown profile is a :class:`ConfigFileError` naming the file, the line and the key (the caller exits 2). A file
holding a secret (``api-key``, ``store``, ``token``) that its group or others may read is refused, never read nor
changed: ``chmod 600`` it (a key must not be readable by other users, and changing a user's file behind their back
would hide that it was exposed). A secret's value is never part of an error.

Where the file is: ``--config FILE``, else ``$ACP_SERVER_CONFIG``, else ``$XDG_CONFIG_HOME/acp-server/config.toml``
(``~/.config/acp-server/config.toml``); only the default may be missing (a file asked for by name must exist).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _parsers as parse
from ._options import OPTIONS, SERVE_OPTIONS, Option
from ._secrets import SECRETS

__all__ = [
    "CONFIG_ENV",
    "PROFILE_ENV",
    "ConfigFile",
    "ConfigFileError",
    "FileValue",
    "config_key",
    "default_config_path",
    "load_config",
    "locate_config",
]

CONFIG_ENV = "ACP_SERVER_CONFIG"
"""The environment variable naming the configuration file (the flag ``--config`` wins over it)."""

PROFILE_ENV = "ACP_SERVER_PROFILE"
"""The environment variable naming the profile (the flag ``--profile`` wins over it)."""

_FILE_OPTIONS: dict[str, Option] = {o.flag.removeprefix("--"): o for o in (*OPTIONS, *SERVE_OPTIONS)}
_LIST_OPTIONS = frozenset({"models", "allow_origins", "sandbox_hide", "web_fetch_allow"})
_WHOLE_NUMBERS: tuple[Callable[[str], Any], ...] = (
    parse.positive_int,
    parse.non_negative_int,
    parse.integer,
    parse.percent,
    parse.port,
)


class ConfigFileError(ValueError):
    """The configuration file cannot be used: the message names the file (and the line and key when there is one)."""


@dataclass(frozen=True)
class FileValue:
    """One setting the file gives: its raw value (text for a parser, a bool for a switch) and where it is."""

    raw: str | bool
    source: str


@dataclass(frozen=True)
class ConfigFile:
    """The settings a configuration file gives, by option ``dest`` (empty when there is no file)."""

    path: Path
    exists: bool
    profile: str | None = None
    values: Mapping[str, FileValue] = field(default_factory=dict)


def config_key(option: Option) -> str:
    """The key of ``option`` in the file: its flag without the dashes."""
    return option.flag.removeprefix("--")


def default_config_path(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/acp-server/config.toml`` (a relative or empty XDG_CONFIG_HOME is ignored, per the spec)."""
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "acp-server" / "config.toml"


def locate_config(flag: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The file's path and whether it was asked for by name (``--config``, else ``$ACP_SERVER_CONFIG``)."""
    if flag:
        return Path(flag).expanduser(), True
    if env.get(CONFIG_ENV, ""):
        return Path(env[CONFIG_ENV]).expanduser(), True
    return default_config_path(env), False


def _line_of(lines: list[str], table: str | None, key: str) -> int | None:
    """The line (1-based) of ``key = ...`` in ``table`` (None: the top level), found in the text: tomllib keeps
    no positions. None when it cannot be found (a key written quoted or dotted, say)."""
    current: str | None = None
    assign = re.compile(rf"""^\s*["']?{re.escape(key)}["']?\s*=""")
    for number, line in enumerate(lines, 1):
        header = re.match(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$", line)
        if header:
            current = re.sub(r"\s*\.\s*", ".", header.group(1)).replace('"', "").replace("'", "")
            continue
        if current == table and assign.match(line):
            return number
    return None


def _where(path: Path, lines: list[str], table: str | None, key: str) -> str:
    line = _line_of(lines, table, key)
    at = f"{path}:{line}" if line is not None else str(path)
    return f"{at}: {f'[{table}] ' if table else ''}{key}"


def _raw(option: Option, value: Any, where: str) -> str | bool:
    """The value as the flag's parser takes it; a wrong type is a :class:`ConfigFileError`."""
    if option.parse is None:
        if isinstance(value, bool):
            return value
        raise ConfigFileError(f"{where}: must be true or false, not {type(value).__name__}")
    if isinstance(value, bool):
        raise ConfigFileError(f"{where}: must be {_expected(option)}, not a boolean")
    if isinstance(value, str):
        return value
    if isinstance(value, int) and option.parse in _WHOLE_NUMBERS:
        return str(value)
    if isinstance(value, list) and option.dest in _LIST_OPTIONS and all(isinstance(item, str) for item in value):
        return ",".join(value)
    raise ConfigFileError(f"{where}: must be {_expected(option)}, not {_toml_type(value)}")


def _expected(option: Option) -> str:
    if option.dest in _LIST_OPTIONS:
        return "a list of strings (or one comma-separated string)"
    if option.parse in _WHOLE_NUMBERS:
        return "a whole number"
    return "a string"


def _toml_type(value: Any) -> str:
    return {dict: "a table", list: "an array", float: "a float", int: "an integer"}.get(type(value), "a date/time")


def _table_values(path: Path, lines: list[str], table: Mapping[str, Any], name: str | None) -> dict[str, FileValue]:
    values: dict[str, FileValue] = {}
    for key, value in table.items():
        where = _where(path, lines, name, key)
        option = _FILE_OPTIONS.get(key)
        if option is None:
            hint = " (named profiles go in [profiles.NAME])" if name is None and isinstance(value, dict) else ""
            raise ConfigFileError(f"{where}: unknown key{hint}; the keys are the flags without their dashes")
        values[option.dest] = FileValue(_raw(option, value, where), where)
    return values


def _check_private(path: Path, document: Mapping[str, Any], mode: int) -> None:
    """A file holding a secret must be readable by its owner only."""
    keys = {config_key(o) for o in _FILE_OPTIONS.values() if o.dest in SECRETS}
    tables = [document, *(t for t in _profiles(document).values() if isinstance(t, dict))]
    held = sorted({key for table in tables for key in table if key in keys})
    if held and mode & 0o077:
        raise ConfigFileError(
            f"{path}: holds {', '.join(held)} but group or others may read it (mode {stat.S_IMODE(mode):04o}); "
            f"make it private: chmod 600 {path}"
        )


def _profiles(document: Mapping[str, Any]) -> dict[str, Any]:
    profiles = document.get("profiles", {})
    return profiles if isinstance(profiles, dict) else {}


def load_config(path: Path, *, required: bool, profile: str | None = None) -> ConfigFile:
    """Read the file at ``path`` (missing and not ``required``: no values). Values of ``[profiles.<profile>]`` win
    over the top level's. Raises :class:`ConfigFileError` on any problem (see the module docstring)."""
    try:
        with open(path, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise ConfigFileError(f"{path}: not a regular file")
            data = file.read((1 << 20) + 1)
    except FileNotFoundError:
        if required:
            raise ConfigFileError(f"{path}: no such file") from None
        if profile is not None:
            raise ConfigFileError(f"{path}: no such file, so no profile {profile!r}") from None
        return ConfigFile(path, exists=False)
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > 1 << 20:
        raise ConfigFileError(f"{path}: over 1 MiB: not a configuration file")
    try:
        text = data.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column \d+\)", message)
        at = f"{path}:{found.group(1)}" if found else str(path)
        raise ConfigFileError(f"{at}: not valid TOML ({message})") from None
    lines = text.splitlines()
    _check_private(path, document, mode)
    top = {key: value for key, value in document.items() if key != "profiles"}
    values = _table_values(path, lines, top, None)
    profiles = document.get("profiles", {})
    if not isinstance(profiles, dict) or not all(isinstance(t, dict) for t in profiles.values()):
        raise ConfigFileError(f"{_where(path, lines, None, 'profiles')}: must be tables [profiles.NAME]")
    for name, table in profiles.items():  # every profile is checked, the one in use or not
        checked = _table_values(path, lines, table, f"profiles.{name}")
        if name == profile:
            values.update(checked)
    if profile is not None and profile not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigFileError(f"{path}: no profile {profile!r} (its profiles: {known})")
    return ConfigFile(path, exists=True, profile=profile, values=values)
