"""Slash commands: one table (:data:`COMMANDS`), every face.

A prompt whose first text part starts with ``/<name>``, ``<name>`` a command of the table, runs that command in
the session's FIFO like any prompt (after the prompts before it, and cancellable like them); any other text
starting with ``/`` goes to the model as it is. A prompt is parsed here once. ``compact`` calls the turn's
compaction (:class:`Compacts`: it compacts what the model sees; nothing is added to the conversation). ``init``
is a model turn with a prompt of its own (the normal tool loop, the mode's permissions, recorded in the history);
the others answer at once with a text message and are not part of the conversation. ``mode`` and ``model`` apply
the checks every face applies (the modes the bridge allows, the models its catalog offers) and tell every face of
the change like any other. A session also offers its MCP servers' prompts (``/mcp__<server>__<prompt>``, see
``_mcp_prompts``): the built-ins first, then those, in :meth:`SlashCommands.commands_of`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from uuid import uuid4

from ..checkpoints import Rewindable
from ..domain import Emit, Prompt, StopReason, TextChunk, TextPart
from ..modes import MODES
from ._files import CommandFiles, UserCommand, expand
from ._mcp_prompts import prompt_commands, run_prompt
from ._rewind import run_rewind
from ._types import CommandHost, CommandSession, Compacts, Runner

if TYPE_CHECKING:
    from ..tools import ToolClient

__all__ = ["COMMANDS", "INIT_PROMPT", "Command", "SlashCommands", "parse_command"]


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command as faces advertise it: its name (without the slash), what it does, and a hint of its input
    (None: it takes none)."""

    name: str
    description: str
    hint: str | None = None


COMMANDS: tuple[Command, ...] = (
    Command(
        "compact",
        "Compact the conversation now: older turns summarised for the model (the history stays whole)",
        "what the summary should keep (optional)",
    ),
    Command("init", "Write or update AGENTS.md, the project's instructions for agents", "what to stress (optional)"),
    Command("mode", "Show the session's mode, or switch it", "mode id (empty: show the modes)"),
    Command("model", "Show the session's model, or switch it", "model name (empty: show the models)"),
    Command(
        "rewind",
        "Undo what the agent did: put the files and the conversation back as before a prompt",
        "prompt number, --files-only, --conversation-only, --force (empty: list the prompts)",
    ),
    Command("help", "What each slash command does"),
)

INIT_PROMPT = """\
Write or update AGENTS.md, the instructions file for coding agents working in this project, in the working \
directory.

First explore: the README, the build and package files (pyproject.toml, package.json, Makefile, Cargo.toml, go.mod \
and the like), the CI configuration, and how the sources and tests are laid out. If AGENTS.md exists, read it and \
improve it rather than starting over, keeping what is still true.

Then write a concise file (well under 200 lines) for an agent new to the project: what the project is; how to set \
it up, build, run, lint and test it (the exact commands, including how to run a single test); how the code is laid \
out; the conventions a change must follow (style, naming, errors, tests, commit messages) as the code and its \
documentation show them. Only facts you have checked: no generic advice, no invented commands.

Write it with write_file (edit_file for an existing file), then say in a few lines what it holds."""
"""The prompt ``/init`` gives the model (what the user typed after the command follows it)."""


_COMMAND = re.compile(r"\s*/(\S+)(.*)", re.DOTALL)


def parse_command(prompt: Prompt, commands: tuple[Command, ...] = COMMANDS) -> tuple[Command, str] | None:
    """The command the prompt's first text part names (``/<name>``, then whitespace or nothing) and the rest of that
    text (stripped); None when it names none of ``commands``."""
    first = next((part for part in prompt.parts if isinstance(part, TextPart)), None)
    if first is None:
        return None
    match = _COMMAND.match(first.text)
    if match is None:
        return None
    command = next((command for command in commands if command.name == match[1]), None)
    return None if command is None else (command, match[2].strip())


S = TypeVar("S", bound=CommandSession)

Handler = Callable[[S, str, Prompt, Emit, "ToolClient | None"], Awaitable[StopReason]]


class SlashCommands(Generic[S]):
    """A turn runner: runs the command a prompt names, else hands the prompt to ``runner`` (the model's)."""

    def __init__(
        self,
        runner: Runner[S],
        host: CommandHost,
        *,
        files: CommandFiles | None = None,
        changed: Callable[[S], None] | None = None,
    ) -> None:
        """``files``: the user's command files (None: none); ``changed``: told as each prompt starts that the
        session's commands may have changed (its command files: the listener compares with what it told)."""
        self._runner = runner
        self._host = host
        self._files = files
        self._changed = changed
        self._handlers: dict[str, Handler[S]] = {
            "compact": self._compact,
            "init": self._init,
            "mode": self._mode,
            "model": self._model,
            "rewind": self._rewind,
            "help": self._help,
        }
        self.commands = tuple(command for command in COMMANDS if command.name in self._handlers)
        if files is not None:
            files.reserve(command.name for command in self.commands)

    def commands_of(self, session: S) -> tuple[Command, ...]:
        """The commands ``session`` offers now: the built-ins, then its MCP servers' prompts, then the user's
        command files (a name already taken is left out)."""
        prompts = prompt_commands(session)
        offered = self.commands + tuple(Command(p.command, p.description, p.hint) for p in prompts)
        taken = {command.name for command in offered}
        files = self._user_commands(session)
        return offered + tuple(Command(f.name, f.description, f.hint) for f in files if f.name not in taken)

    def _user_commands(self, session: S) -> tuple[UserCommand, ...]:
        return () if self._files is None else self._files.commands(session.cwd)

    async def __call__(self, session: S, prompt: Prompt, emit: Emit, client: ToolClient | None, /) -> StopReason:
        parsed = parse_command(prompt, self.commands)
        if parsed is not None:
            command, argument = parsed
            return await self._handlers[command.name](session, argument, prompt, emit, client)
        if self._files is not None and self._changed is not None:  # the files may have changed: told (if so) first
            self._changed(session)
        prompts = {p.command: p for p in prompt_commands(session)}
        offered = tuple(Command(name, "") for name in prompts)
        named = parse_command(prompt, offered) if offered else None
        if named is not None:
            return await run_prompt(prompts[named[0].name], named[1], session, prompt, emit, client, self._runner)
        files = {f.name: f for f in self._user_commands(session) if f.name not in prompts}
        named = parse_command(prompt, tuple(Command(name, "") for name in files)) if files else None
        if named is None:
            return await self._runner(session, prompt, emit, client)
        text = expand(files[named[0].name], named[1])
        first = next(index for index, part in enumerate(prompt.parts) if isinstance(part, TextPart))
        parts = (*prompt.parts[:first], TextPart(text), *prompt.parts[first + 1 :])
        return await self._runner(session, Prompt(parts), emit, client)

    # -- the commands ------------------------------------------------------------------------------------------

    async def _compact(
        self, session: S, argument: str, prompt: Prompt, emit: Emit, client: ToolClient | None
    ) -> StopReason:
        runner: object = self._runner  # a turn runner that may also compact
        if not isinstance(runner, Compacts):
            return await _say(emit, "This agent's turns do not compact.")
        seen = getattr(session, "seen", None)  # after a /rewind: what the model sees, not the whole history
        told = session if seen is None else _Seen(session, seen())
        outcome = await runner.compact(told, emit, argument)  # /compact <instructions>: what the summary keeps
        return "end_turn" if outcome.text is None else await _say(emit, outcome.text)

    async def _init(
        self, session: S, argument: str, prompt: Prompt, emit: Emit, client: ToolClient | None
    ) -> StopReason:
        text = INIT_PROMPT + (f"\n\nThe user adds: {argument}" if argument else "")
        first = next(index for index, part in enumerate(prompt.parts) if isinstance(part, TextPart))
        parts = (*prompt.parts[:first], TextPart(text), *prompt.parts[first + 1 :])
        return await self._runner(session, Prompt(parts), emit, client)

    async def _mode(
        self, session: S, argument: str, prompt: Prompt, emit: Emit, client: ToolClient | None
    ) -> StopReason:
        rules = self._host.settings
        current = rules.mode_of(session.mode)
        wanted = argument.split()[0] if argument else ""
        if not wanted:
            lines = [f"Mode: {current}. Switch with /mode <id>:"]
            for mode in rules.offered:
                lines.append(f"- {mode.id}{' (current)' if mode.id == current else ''}: {mode.description}")
            return await _say(emit, "\n".join(lines))
        problem = rules.mode_problem(wanted)
        if problem is not None:
            return await _say(emit, _sentence(problem))
        await session.set_mode(wanted)
        return await _say(emit, f"Mode set to {wanted}: {MODES[wanted].description}.")

    async def _model(
        self, session: S, argument: str, prompt: Prompt, emit: Emit, client: ToolClient | None
    ) -> StopReason:
        rules = self._host.settings
        catalog = rules.models
        if catalog is None:
            return await _say(emit, "This server offers no choice of model.")
        current = catalog.resolve(session.model)
        wanted = argument.split()[0] if argument else ""
        if not wanted:
            lines = [f"Model: {current}. Switch with /model <name>:"]
            lines += [f"- {model}{' (current)' if model == current else ''}" for model in catalog.available]
            return await _say(emit, "\n".join(lines))
        problem = rules.model_problem(wanted)
        if problem is not None:
            return await _say(emit, _sentence(problem))
        await session.set_model(wanted)
        return await _say(emit, f"Model set to {wanted}: the next requests use it.")

    async def _rewind(
        self, session: S, argument: str, prompt: Prompt, emit: Emit, client: ToolClient | None
    ) -> StopReason:
        rewindable: object = session  # a session that keeps checkpoints (the bridge's do)
        if not isinstance(rewindable, Rewindable):
            return await _say(emit, "This session keeps no checkpoints.")
        return await _say(emit, await run_rewind(rewindable, argument, client))

    async def _help(
        self, session: S, argument: str, prompt: Prompt, emit: Emit, client: ToolClient | None
    ) -> StopReason:
        lines = ["Slash commands (type them at the start of a prompt):"]
        for command in self.commands_of(session):
            usage = f"/{command.name}" + (f" <{command.hint}>" if command.hint else "")
            lines.append(f"- {usage}: {command.description}")
        lines.append("\nAny other text starting with / goes to the model as it is.")  # a paragraph of its own
        return await _say(emit, "\n".join(lines))


class _Seen:
    """A session as ``/compact`` gives it to the turn: its conversation is what the model sees (no rewound turn);
    everything else is the session's (``record_compaction`` maps the view's count back to a stored seq)."""

    def __init__(self, session: object, conversation: object) -> None:
        self._session = session
        self.conversation = conversation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def _sentence(problem: str) -> str:
    """A settings rule's refusal (``unknown mode 'x'; available: ...``) as the sentence a command answers."""
    return f"{problem[:1].upper()}{problem[1:]}."


async def _say(emit: Emit, text: str) -> StopReason:
    await emit(TextChunk(text, message_id=f"command-{uuid4().hex}"))  # a message of its own
    return "end_turn"
