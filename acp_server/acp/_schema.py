"""The official ACP schema models (``acp.schema``), imported on first use and wrapped once for validation.

Importing ``acp.schema`` builds ~300 pydantic models (~0.7 s): nothing imports it before it is needed, and
:func:`preload` warms it in a worker thread right after ``initialize`` has been answered.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["dump", "preload", "schema", "validate"]

_lock = threading.Lock()


def schema() -> ModuleType:
    """The ``acp.schema`` module (imported once, thread-safe)."""
    with _lock:
        return importlib.import_module("acp.schema")


def preload() -> None:
    """Import the schema and the model client ahead of the first request that needs them (run in a thread)."""
    schema()
    importlib.import_module("openai")


def validate(model_name: str, params: Any, method: str) -> Any:
    """Validate ``params`` against ``acp.schema.<model_name>``; failures raise -32602 with the field errors."""
    from pydantic import ValidationError

    model: type[BaseModel] = getattr(schema(), model_name)
    if not isinstance(params, dict):
        raise InvalidInputError(f"Invalid params for {method}: expected an object")
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors: list[dict[str, object]] = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(root)", "message": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        first = errors[0] if errors else {"field": "?", "message": "invalid"}
        raise InvalidInputError(
            f"Invalid params for {method}: {first['field']}: {first['message']}", errors
        ) from None


def dump(model: BaseModel) -> dict[str, Any]:
    """Wire form of a schema model: camelCase aliases, no unset optionals."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
