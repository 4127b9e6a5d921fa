"""The parsers of the configuration's values, one per kind of option: text in, checked value out.

Invariant: a parser either returns a checked value or raises ``ValueError`` whose message completes "invalid value
for FLAG: VALUE (...)"; the caller names the flag or variable and decides whether the value may be shown.
"""

from __future__ import annotations

from ..modes import MODES

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "LOG_LEVELS",
    "MAX_SYSTEM_PROMPT_BYTES",
    "boolean",
    "host",
    "integer",
    "log_file",
    "log_level",
    "mode",
    "models",
    "non_negative_int",
    "origins",
    "percent",
    "port",
    "positive_int",
    "system_prompt_file",
    "token",
]


def token(text: str) -> str:
    """A bearer token: surrounding whitespace stripped; empty or blank is an error (it would protect nothing)."""
    token = text.strip()
    if not token:
        raise ValueError("must not be empty or blank")
    return token


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (surrounding blanks ignored)."""
    value = int(text.strip())
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def positive_int(text: str) -> int:
    """A whole number > 0 (surrounding blanks ignored)."""
    value = int(text.strip())
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def percent(text: str) -> int:
    """A percentage from 0 to 100, with or without its ``%``."""
    value = int(text.strip().removesuffix("%"))
    if not 0 <= value <= 100:
        raise ValueError("must be a percentage from 0 to 100")
    return value


def integer(text: str) -> int:
    """Any whole number (a timeout's ``<= 0`` means "disabled" to its owner)."""
    return int(text.strip())


def port(text: str) -> int:
    """A TCP port from 0 (any free one) to 65535."""
    value = int(text.strip())
    if not 0 <= value <= 65535:
        raise ValueError("must be from 0 to 65535")
    return value


def host(text: str) -> str:
    """An address to listen on; blank is an error."""
    host = text.strip()
    if not host:
        raise ValueError("must not be empty")
    return host


def origins(text: str) -> tuple[str, ...]:
    """Comma-separated ``scheme://host[:port]`` origins (trailing slash dropped) or ``*``."""
    origins = tuple(o.strip().rstrip("/") for o in text.split(",") if o.strip())
    for origin in origins:
        if origin != "*" and ("://" not in origin or not origin.startswith(("http://", "https://"))):
            raise ValueError(f"{origin!r} is not an origin (scheme://host[:port] or *)")
    return origins


def networks(text: str) -> tuple[str, ...]:
    """Comma-separated IP networks (``10.0.0.0/8``, ``127.0.0.1``, ``fd00::/8``), or ``private`` for every one;
    returned in their normal spelling."""
    import ipaddress

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError("must name at least one network, or private")
    if any(name.lower() == "private" for name in names):
        return ("0.0.0.0/0", "::/0")
    out = []
    for name in names:
        try:
            out.append(str(ipaddress.ip_network(name, strict=False)))
        except ValueError:
            raise ValueError(f"{name!r} is not an IP network (such as 10.0.0.0/8 or 127.0.0.1)") from None
    return tuple(out)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVEL = "INFO"
"""The log level when none is asked for (``ask`` lowers its own to WARNING)."""


def log_level(text: str) -> str:
    """One of :data:`LOG_LEVELS`, any case (returned upper-case)."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return level


def mode(text: str) -> str:
    """The id of one of the session modes (:data:`acp_server.modes.MODES`)."""
    mode = text.strip()
    if mode not in MODES:
        raise ValueError(f"must be one of {', '.join(MODES)}")
    return mode


def models(text: str) -> tuple[str, ...]:
    """A comma-separated list of model names: blanks around names are dropped, duplicates kept once."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise ValueError("must name at least one model")
    return names


def sandbox_mechanism(text: str) -> str:
    """``bubblewrap`` or ``landlock``."""
    if text not in ("bubblewrap", "landlock"):
        raise ValueError("must be bubblewrap or landlock")
    return text


def paths(text: str) -> tuple[str, ...]:
    """A comma-separated list of paths (``~`` allowed): blanks around them dropped, duplicates kept once."""
    return tuple(dict.fromkeys(path.strip() for path in text.split(",") if path.strip()))


def boolean(text: str) -> bool:
    """An on/off switch given in the environment."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be 1, true, yes, on, or 0, false, no, off")


MAX_SYSTEM_PROMPT_BYTES = 256 * 1024


def system_prompt_file(text: str) -> str:
    """The text of a system prompt file: read now (a missing, unreadable, binary or empty one is a usage error)."""
    if not text.strip():
        raise ValueError("must not be empty")
    try:
        with open(text, "rb") as file:
            data = file.read(MAX_SYSTEM_PROMPT_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_SYSTEM_PROMPT_BYTES:
        raise ValueError(f"it is over {MAX_SYSTEM_PROMPT_BYTES // 1024} KiB")
    try:
        prompt = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    if not prompt.strip() or "\0" in prompt:
        raise ValueError("it is empty" if not prompt.strip() else "it is not text (a NUL byte)")
    return prompt


def log_file(text: str) -> str:
    """A path the agent can append to: checked (and created) now, so a bad one is a usage error, not a crash."""
    if not text.strip():
        raise ValueError("must not be empty")
    try:
        with open(text, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ValueError(f"cannot write to it: {exc.strerror or exc}") from None
    return text
