"""The official ACP schema models (``acp.schema``), imported on first use and wrapped once for validation.

Importing ``acp.schema`` builds ~300 pydantic models (~0.7 s): nothing imports it before it is needed, and the face
warms it with :func:`preload` in a worker thread once the first reply is on its way.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..collector import paused_for_imports
from ..errors import InvalidInputError
from ..provider import import_client_modules

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["load_schema", "model", "preload", "schema", "validate"]

M = TypeVar("M", bound="BaseModel")

logger = logging.getLogger("acp_server.acp")

_lock = threading.Lock()


def schema() -> ModuleType:
    """The ``acp.schema`` module (imported once, thread-safe)."""
    global _loaded
    with _lock:
        module = importlib.import_module("acp.schema")
        _loaded = True
        return module


_loaded = False


async def load_schema() -> None:
    """Import the schema in a worker thread unless it is loaded: an async caller (the REST prompt route) then never
    holds the event loop while the import — or the warm-up thread importing it — runs. No checkpoint once loaded."""
    if not _loaded:
        import anyio.to_thread

        await anyio.to_thread.run_sync(schema, abandon_on_cancel=True)


@functools.cache
def model(name: str) -> type[BaseModel]:
    """``acp.schema.<name>``, looked up once."""
    found: type[BaseModel] = getattr(schema(), name)
    return found


def preload() -> None:
    """Import the schema and the model client ahead of the first request that needs them (run in a thread), the
    collector paused, then freeze what the process holds so far out of its view (:mod:`acp_server.collector`).

    Frozen once per process: a later warm-up (tests start many daemons in one process) freezes nothing more. Best
    effort: a warm-up that fails (no file descriptors left under a connection flood, say) is logged and the import
    happens again on first use; it never takes the process down.
    """
    global _warmed
    try:
        with paused_for_imports(freeze=not _warmed):
            schema()
            import_client_modules()
    except Exception as exc:
        logger.warning("could not preload the ACP schema and the model client (%s): they load on first use", exc)
        return
    finally:
        _warmed = True


_warmed = False


def validate(model: type[M], params: Any, method: str) -> M:
    """``params`` validated against ``model``; failures raise -32602 with the field errors."""
    from pydantic import ValidationError

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
        raise InvalidInputError(f"Invalid params for {method}: {first['field']}: {first['message']}", errors) from None
