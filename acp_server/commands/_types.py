"""What the slash commands need of the layers above them (the bridge's session and settings rules) and of the
turn (its compaction), as protocols: the commands import neither."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ..domain import Emit, Prompt, StopReason
from ..modes import Mode

if TYPE_CHECKING:
    from ..mcp import McpServers
    from ..tools import ToolClient

__all__ = ["CommandHost", "CommandRules", "CommandSession", "Compacts", "ModelChoice", "Runner"]


class CommandSession(Protocol):
    """A session as the commands see it: its directory, its mode and model (None: the default), which they may
    switch, and its MCP servers (None: it never had one)."""

    @property
    def cwd(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def mcp(self) -> McpServers | None: ...

    async def set_mode(self, mode: str, /) -> None: ...

    async def set_model(self, model: str, /) -> None: ...


S_contra = TypeVar("S_contra", bound=CommandSession, contravariant=True)

Runner = Callable[[S_contra, Prompt, Emit, "ToolClient | None"], Awaitable[StopReason]]
"""The model's turn runner (what the bridge's ``TurnRunner`` is)."""


class CompactResult(Protocol):
    """What a compaction on demand did: ``text`` is what the user is answered when nothing was compacted (None when
    the compaction's own notes said it)."""

    @property
    def text(self) -> str | None: ...


@runtime_checkable
class Compacts(Protocol):
    """A runner that compacts a session's conversation now (the model's turn does); ``/compact`` calls it in the
    session's FIFO slot."""

    async def compact(self, session: Any, emit: Emit, instructions: str = "", /) -> CompactResult: ...


class ModelChoice(Protocol):
    """The models a session may pick, and the one a session's choice resolves to."""

    @property
    def available(self) -> Sequence[str]: ...

    def resolve(self, model: str | None, /) -> str: ...


class CommandRules(Protocol):
    """The bridge's settings rules, as far as ``/mode`` and ``/model`` ask them."""

    @property
    def offered(self) -> tuple[Mode, ...]: ...

    @property
    def models(self) -> ModelChoice | None: ...

    def mode_of(self, mode: str | None, /) -> str: ...

    def mode_problem(self, mode_id: object, /) -> str | None: ...

    def model_problem(self, model: object, /) -> str | None: ...


class CommandHost(Protocol):
    """What the commands need of the bridge: its settings rules (the modes it offers, the mode a session reads as,
    the models its sessions may pick)."""

    @property
    def settings(self) -> CommandRules: ...
