"""The one owner of a session's settings rules: which modes a session may have here, the mode it reads as, which
models it may pick, which config options exist, and the field-naming refusal of anything else.

Every face (ACP over stdio and ``/acp``, the daemon's REST routes, the slash commands) asks these rules and never
checks a mode, a model or a config option id itself. Invariant: a value these rules refuse is never stored; a
refusal is an :class:`~acp_server.errors.InvalidInputError` built by ``for_field`` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Literal, NamedTuple

from ..errors import InvalidInputError
from ..modes import MODES, Mode

if TYPE_CHECKING:
    from ..turn import ModelCatalog
    from ._session import SessionEntry

__all__ = ["Choice", "SettingsRules"]


class Choice(NamedTuple):
    """A checked choice of a session setting: which one, and its value (made only by :class:`SettingsRules`)."""

    setting: Literal["mode", "model"]
    value: str


class SettingsRules:
    """The modes (``modes`` None: any) and models (``models`` None: no choice) of this bridge's sessions, and
    ``default_mode``, the mode of a session whose own is not offered here."""

    __slots__ = ("_modes", "default_mode", "models", "offered")

    def __init__(self, default_mode: str, modes: Collection[str] | None, models: ModelCatalog | None) -> None:
        self.default_mode = default_mode
        self.models = models
        self._modes = None if modes is None else frozenset(modes)
        self.offered: tuple[Mode, ...] = tuple(mode for mode in MODES.values() if self.allows_mode(mode.id))
        """The modes offered here, in :data:`~acp_server.modes.MODES` order."""

    def allows_mode(self, mode: str) -> bool:
        """Whether a session may be in ``mode`` here."""
        return self._modes is None or mode in self._modes

    def mode_of(self, mode: str | None) -> str:
        """A session's mode as offered here: ``mode`` when allowed, else (none, or no longer allowed) the default."""
        return mode if mode is not None and self.allows_mode(mode) else self.default_mode

    def mode_problem(self, mode_id: object, *, offered_by: str | None = None) -> str | None:
        """Why ``mode_id`` is not a mode a session may switch to here (None: it is). ``offered_by`` (e.g. ``"this
        daemon"``): a known mode not offered says so, naming it; else every refused id reads as unknown."""
        if isinstance(mode_id, str) and self.allows_mode(mode_id) and mode_id in MODES:
            return None
        offered = ", ".join(mode.id for mode in self.offered)
        if offered_by is not None and isinstance(mode_id, str) and mode_id in MODES:
            return f"mode {mode_id!r} is not offered by {offered_by}; available: {offered}"
        return f"unknown mode {mode_id!r}; available: {offered}"

    def offered_mode(self, mode_id: object, field: str = "modeId", *, offered_by: str | None = None) -> str:
        """``mode_id`` when sessions may have it here; else ``InvalidInputError`` naming ``field``."""
        problem = self.mode_problem(mode_id, offered_by=offered_by)
        if problem is not None:
            raise InvalidInputError.for_field(field, problem)
        assert isinstance(mode_id, str)
        return mode_id

    def mode_choice(self, mode_id: object, field: str = "modeId", *, offered_by: str | None = None) -> Choice:
        """The mode ``mode_id`` as a choice to apply (see :meth:`offered_mode`)."""
        return Choice("mode", self.offered_mode(mode_id, field, offered_by=offered_by))

    def model_problem(self, model: object) -> str | None:
        """Why ``model`` is not a model a session may pick here (None: it is)."""
        catalog = self.models
        if catalog is not None and isinstance(model, str) and catalog.offers(model):
            return None
        available = ", ".join(catalog.available) if catalog is not None else "(no model choice here)"
        return f"unknown model {model!r}; available: {available}"

    def offered_model(self, model: object, field: str = "value") -> str:
        """``model`` when sessions may pick it here; else ``InvalidInputError`` naming ``field``."""
        problem = self.model_problem(model)
        if problem is not None:
            raise InvalidInputError.for_field(field, problem)
        assert isinstance(model, str)
        return model

    def config_choice(self, config_id: str, value: object, *, offered_by: str | None = None) -> Choice:
        """The setting ``config_id`` names (``mode``; ``model`` when there is a choice) and its checked ``value``;
        else ``InvalidInputError`` naming ``configId`` (or ``value``)."""
        if config_id == "mode":
            return self.mode_choice(value, "value", offered_by=offered_by)
        if config_id != "model" or self.models is None:
            offered = "mode, model" if self.models is not None else "mode"
            raise InvalidInputError.for_field("configId", f"unknown config option {config_id!r}; available: {offered}")
        return Choice("model", self.offered_model(value))

    async def apply(
        self,
        get: Callable[[str], SessionEntry],
        session_id: str,
        choice: Choice,
        *,
        origin: object | None,
        before: Callable[[str], object] | None,
    ) -> SessionEntry:
        """Store the checked ``choice`` on the session ``get`` finds: ``before(session_id)`` first (a face readies
        what hears the change), then the change, told to the settings listeners as asked by ``origin``."""
        if before is not None:
            before(session_id)
        entry = get(session_id)
        if choice.setting == "mode":
            await entry.set_mode(choice.value, origin=origin)
        else:
            await entry.set_model(choice.value, origin=origin)
        return entry
