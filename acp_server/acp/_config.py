"""A session's config options in ACP's shape (``configOptions``): its mode, then its model when there is a choice.

One builder for every face (ACP answers and ``config_option_update``, the daemon's REST answers and events), so the
two views of a session never disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..bridge import SettingsRules

__all__ = ["config_options"]


def config_options(rules: SettingsRules, mode: str, model: str | None) -> list[dict[str, Any]]:
    """The mode option (the modes ``rules`` offer; ``mode``, the session's stored one, as offered here), then the
    model option when ``rules`` offer a choice (``model``: the session's stored choice, None for the default), from
    the models known now."""
    catalog = rules.models
    config: list[dict[str, Any]] = [
        {
            "type": "select",
            "id": "mode",
            "name": "Mode",
            "description": "When the agent asks before editing files and running commands",
            "category": "mode",
            "currentValue": rules.mode_of(mode),
            "options": [{"value": m.id, "name": m.name, "description": m.description} for m in rules.offered],
        }
    ]
    if catalog is not None:
        config.append(
            {
                "type": "select",
                "id": "model",
                "name": "Model",
                "description": "The model that answers the next requests of this session",
                "category": "model",
                "currentValue": catalog.resolve(model),
                "options": [{"value": name, "name": name} for name in catalog.available],
            }
        )
    return config
