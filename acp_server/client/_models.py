"""What the daemon sends, as typed values: capabilities, a prompt's result, a session's config (its events:
``_events.py``).

Parsers raise ``ValueError`` on a malformed payload; the caller turns it into a ``DaemonProtocolError`` that
names the request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._limits import validate_limit

__all__ = [
    "Capabilities",
    "ConfigOption",
    "ModeInfo",
    "PromptInput",
    "PromptResult",
    "SessionConfig",
    "parse_capabilities",
    "parse_config",
    "prompt_blocks",
]

PromptInput = str | Sequence[Mapping[str, Any]]
"""A prompt: plain text, or ACP content blocks (``{"type": "text", "text": ...}``, ``resource_link``, ...)."""


def prompt_blocks(prompt: PromptInput) -> list[dict[str, Any]]:
    """The ``prompt`` field of a prompt request; an empty prompt is a ``ValueError`` (nothing is sent)."""
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt must not be empty")
        return [{"type": "text", "text": prompt}]
    blocks = [dict(block) for block in prompt]
    if not blocks:
        raise ValueError("prompt must have at least one content block")
    for block in blocks:
        if not isinstance(block.get("type"), str):
            raise ValueError(f"every content block needs a string 'type'; got {block!r}")
    return blocks


def _str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} must be a non-empty string; got {value!r}")
    return value


def _int(payload: Mapping[str, Any], key: str) -> int:
    value = payload.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key!r} must be an integer; got {value!r}")
    return value


def _optional_int(payload: Mapping[str, Any], key: str) -> int | None:
    return None if payload.get(key) is None else _int(payload, key)


def _object(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise ValueError(f"{key!r} must be an object; got {value!r}")
    return value


# -- capabilities and results ----------------------------------------------------------------------------------


def _strings(payload: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = payload.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} must be a list of strings; got {value!r}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class ModeInfo:
    """A mode sessions may have on the daemon: ``tools`` are the tools the model is offered in it."""

    id: str
    name: str
    description: str
    tools: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """``GET /capabilities``. ``max_pending_prompts_per_session`` None = the daemon has no limit (Q9).

    ``modes``: the modes sessions may have (a daemon without a token offers only ``read-only``), ``default_mode_id``
    a new session's; ``tools``: every tool some mode offers. Empty / None from a daemon older than modes.
    ``models``: the models a session may pick (``set_config_option(..., "model", ...)``), the default
    (``default_model_id``) first; empty / None when the daemon offers no model choice.
    """

    version: int
    protocol_versions: tuple[int, ...]
    features: frozenset[str]
    max_pending_prompts_per_session: int | None
    prompt_deadline_ms: int | None
    stream_idle_timeout_ms: int | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    modes: tuple[ModeInfo, ...] = ()
    default_mode_id: str | None = None
    tools: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    default_model_id: str | None = None

    def supports(self, feature: str) -> bool:
        """Whether ``features`` lists ``feature`` (e.g. ``"session.load"``)."""
        return feature in self.features


def _modes(body: Mapping[str, Any]) -> tuple[tuple[ModeInfo, ...], str | None]:
    if body.get("modes") is None:
        return (), None
    modes = _object(body, "modes")
    available = modes.get("availableModes")
    if not isinstance(available, list):
        raise ValueError(f"'modes.availableModes' must be a list; got {available!r}")
    infos: list[ModeInfo] = []
    for mode in available:
        if not isinstance(mode, Mapping):
            raise ValueError(f"a mode must be an object; got {mode!r}")
        description = mode.get("description")
        infos.append(
            ModeInfo(
                _str(mode, "id"),
                _str(mode, "name"),
                description if isinstance(description, str) else "",
                _strings(mode, "tools"),
            )
        )
    return tuple(infos), _str(modes, "defaultModeId")


def parse_capabilities(body: object) -> Capabilities:
    if not isinstance(body, Mapping):
        raise ValueError(f"capabilities must be an object; got {body!r}")
    limits = _object(body, "limits")
    versions = body.get("protocolVersions", [])
    features = body.get("features", [])
    if not isinstance(versions, list) or not all(isinstance(v, int) for v in versions):
        raise ValueError(f"'protocolVersions' must be a list of integers; got {versions!r}")
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise ValueError(f"'features' must be a list of strings; got {features!r}")
    modes, default_mode_id = _modes(body)
    models = _object(body, "models") if body.get("models") is not None else None
    return Capabilities(
        modes=modes,
        default_mode_id=default_mode_id,
        models=_strings(models, "availableModels") if models is not None else (),
        default_model_id=_str(models, "defaultModelId") if models is not None else None,
        tools=_strings(body, "tools"),
        version=_int(body, "v"),
        protocol_versions=tuple(versions),
        features=frozenset(features),
        max_pending_prompts_per_session=validate_limit(
            limits.get("maxPendingPromptsPerSession"), "limits.maxPendingPromptsPerSession"
        ),
        prompt_deadline_ms=_optional_int(limits, "promptDeadlineMs"),
        stream_idle_timeout_ms=_optional_int(limits, "streamIdleTimeoutMs"),
        raw=body,
    )


@dataclass(frozen=True, slots=True)
class PromptResult:
    """How an accepted prompt's turn ended: ``stop_reason`` is ACP's (``end_turn``, ``cancelled``, ...)."""

    prompt_id: str
    stop_reason: str


@dataclass(frozen=True, slots=True)
class ConfigOption:
    """One session config option (ACP's ``SessionConfigOption``, a select): ``id`` / ``category`` ``mode`` or
    ``model``; ``values`` what it may be set to; ``current_value`` one of them."""

    id: str
    name: str
    category: str
    current_value: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """``POST /session/{id}/config``'s answer: the session's mode and model now (``model_id`` None: no model
    choice is offered) and every config option's state."""

    session_id: str
    mode_id: str
    model_id: str | None
    options: tuple[ConfigOption, ...]

    def option(self, config_id: str) -> ConfigOption | None:
        """The option ``config_id`` (``mode``, ``model``), None when the daemon does not offer it."""
        return next((option for option in self.options if option.id == config_id), None)


def _config_options(payload: Mapping[str, Any]) -> tuple[ConfigOption, ...]:
    options = payload.get("configOptions")
    if not isinstance(options, list):
        raise ValueError(f"'configOptions' must be a list; got {options!r}")
    parsed: list[ConfigOption] = []
    for option in options:
        if not isinstance(option, Mapping) or not isinstance(option.get("options"), list):
            raise ValueError(f"a config option must be an object with 'options'; got {option!r}")
        values = tuple(_str(value, "value") if isinstance(value, Mapping) else "" for value in option["options"])
        if not all(values):
            raise ValueError(f"every value of config option {option.get('id')!r} must be an object with 'value'")
        name, category = option.get("name"), option.get("category")
        parsed.append(
            ConfigOption(
                _str(option, "id"),
                name if isinstance(name, str) else "",
                category if isinstance(category, str) else "",
                _str(option, "currentValue"),
                values,
            )
        )
    return tuple(parsed)


def parse_config(body: Mapping[str, Any]) -> SessionConfig:
    """A :class:`SessionConfig` from ``POST /session/{id}/config``'s answer; ``ValueError`` when malformed."""
    model_id = body.get("modelId")
    if model_id is not None and (not isinstance(model_id, str) or not model_id):
        raise ValueError(f"'modelId' must be a non-empty string or null; got {model_id!r}")
    return SessionConfig(_str(body, "sessionId"), _str(body, "modeId"), model_id, _config_options(body))
