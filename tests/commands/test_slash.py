"""Slash commands at the bridge (every face's prompts pass here): which prompts name one, what each does, and that
any other ``/text`` goes to the model as it is."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from acp_server.bridge import SessionBridge, SettingsChange
from acp_server.commands import COMMANDS, INIT_PROMPT, parse_command
from acp_server.domain import Emit, Prompt, PromptEvent, ResourceLinkPart, StopReason, TextChunk, TextPart
from acp_server.turn import ModelCatalog
from tests.bridge._support import read_all

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Compacted:
    """A compaction's outcome as the turn's ``CompactOutcome`` shows it: what the user is answered, if anything."""

    text: str | None


class ModelRunner:
    """The model's runner: records the prompts it is given, answers ``model``; records its compactions."""

    def __init__(self, compact_answer: str | None = None) -> None:
        self.prompts: list[Prompt] = []
        self.compactions = 0
        self.compact_answer = compact_answer
        self.instructions: list[str] = []

    async def compact(self, session: object, emit: Emit, instructions: str = "", /) -> Compacted:
        self.compactions += 1
        self.instructions.append(instructions)
        return Compacted(self.compact_answer)

    async def __call__(self, session: object, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        self.prompts.append(prompt)
        await emit(TextChunk("model"))
        return "end_turn"


def text(*parts: str) -> Prompt:
    return Prompt(tuple(TextPart(part) for part in parts))


def said(events: list[PromptEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextChunk))


async def run(bridge: SessionBridge, session_id: str, prompt: Prompt) -> str:
    handle = bridge.send_prompt(session_id, prompt)
    events = await read_all(handle.events)
    assert await handle.result() == "end_turn"
    return said(events)


def test_which_prompts_name_a_command() -> None:
    names = {command.name for command in COMMANDS}
    assert {"init", "mode", "model", "help"} <= names
    init = next(command for command in COMMANDS if command.name == "init")
    mode = next(command for command in COMMANDS if command.name == "mode")
    assert parse_command(text("/mode read-only")) == (mode, "read-only")
    assert parse_command(text("  /mode\n  plan  ")) == (mode, "plan")
    assert parse_command(text("/init")) == (init, "")
    assert parse_command(Prompt((ResourceLinkPart("file:///a", "a"), TextPart("/init x")))) == (init, "x")
    assert parse_command(text("/modes")) is None  # a name is a whole word
    assert parse_command(text("/unknown thing")) is None
    assert parse_command(text("please /mode read-only")) is None
    assert parse_command(text("/usr/bin/env is odd")) is None
    assert parse_command(text("")) is None


async def test_help_lists_every_command_and_never_reaches_the_model() -> None:
    runner = ModelRunner()
    async with SessionBridge(runner) as bridge:
        entry = bridge.create_session("/p")
        answer = await run(bridge, entry.session_id, text("/help"))
        for command in bridge.commands:
            assert f"/{command.name}" in answer and command.description in answer
        assert runner.prompts == []
        assert entry.conversation.messages == []  # not part of the conversation
        # Markdown: the closing sentence is a paragraph of its own, not glued onto the last bullet
        *_, last_bullet, blank, closing = answer.split("\n")
        assert last_bullet.startswith("- /") and blank == "" and closing.startswith("Any other text")


async def test_an_unknown_slash_word_goes_to_the_model_as_it_is() -> None:
    runner = ModelRunner()
    async with SessionBridge(runner) as bridge:
        entry = bridge.create_session("/p")
        prompt = text("/usr/bin/env: what does it do?")
        assert await run(bridge, entry.session_id, prompt) == "model"
        assert runner.prompts == [prompt]


async def test_mode_switches_with_the_checks_of_set_mode_and_tells_the_listeners() -> None:
    changes: list[SettingsChange] = []
    async with SessionBridge(ModelRunner(), modes=["default", "accept-edits", "read-only"]) as bridge:
        bridge.add_settings_listener(changes.append)
        entry = bridge.create_session("/p")
        sid = entry.session_id
        shown = await run(bridge, sid, text("/mode"))
        assert "Mode: default." in shown and "- read-only:" in shown and "bypass-permissions" not in shown
        assert await run(bridge, sid, text("/mode read-only")) == (
            "Mode set to read-only: Read and search only: no edits, no commands."
        )
        assert entry.mode == "read-only"
        assert [(c.setting, c.previous) for c in changes] == [("title", ""), ("mode", "default")]
        refused = await run(bridge, sid, text("/mode bypass-permissions"))  # a mode this bridge does not allow
        assert refused == "Unknown mode 'bypass-permissions'; available: default, accept-edits, read-only."
        assert (await run(bridge, sid, text("/mode nonsense"))).startswith("Unknown mode 'nonsense'")
        assert entry.mode == "read-only"


async def test_model_switches_to_an_offered_model_only() -> None:
    catalog = ModelCatalog("small", ["small", "large"])
    async with SessionBridge(ModelRunner(), models=catalog) as bridge:
        entry = bridge.create_session("/p")
        sid = entry.session_id
        listing = "Model: small. Switch with /model <name>:\n- small (current)\n- large"
        assert await run(bridge, sid, text("/model")) == listing
        assert await run(bridge, sid, text("/model large")) == "Model set to large: the next requests use it."
        assert entry.model == "large"
        assert (await run(bridge, sid, text("/model huge"))).startswith("Unknown model 'huge'; available: small, large")
        assert entry.model == "large"


async def test_model_without_a_choice_says_so() -> None:
    async with SessionBridge(ModelRunner()) as bridge:
        entry = bridge.create_session("/p")
        assert await run(bridge, entry.session_id, text("/model large")) == "This server offers no choice of model."
        assert entry.model is None


async def test_compact_calls_the_turns_compaction_whatever_follows_the_command() -> None:
    runner = ModelRunner()
    async with SessionBridge(runner) as bridge:
        entry = bridge.create_session("/p")
        await run(bridge, entry.session_id, text("/compact  now please"))
        assert runner.compactions == 1
        assert runner.instructions == ["now please"]  # what follows the command: the summary's instructions
        assert runner.prompts == []  # parsed once, here: the turn is never handed the command as a prompt
        assert "compact" in {command.name for command in bridge.commands}


async def test_compact_with_nothing_to_compact_says_what_the_turn_answers() -> None:
    runner = ModelRunner(compact_answer="Nothing to compact yet: the conversation is about 40 tokens.")
    async with SessionBridge(runner) as bridge:
        entry = bridge.create_session("/p")
        assert await run(bridge, entry.session_id, text("/compact")) == runner.compact_answer


async def test_compact_with_a_runner_that_cannot_compact_says_so() -> None:
    async def answer(session: object, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        raise AssertionError("never asked")

    async with SessionBridge(answer) as bridge:
        entry = bridge.create_session("/p")
        assert await run(bridge, entry.session_id, text("/compact")) == "This agent's turns do not compact."


async def test_init_asks_the_model_through_the_normal_turn_with_the_users_notes_and_parts() -> None:
    runner = ModelRunner()
    async with SessionBridge(runner) as bridge:
        entry = bridge.create_session("/p")
        link = ResourceLinkPart("file:///p/README.md", "README.md")
        assert await run(bridge, entry.session_id, Prompt((TextPart("/init stress the tests"), link))) == "model"
        [asked] = runner.prompts
        first = asked.parts[0]
        assert isinstance(first, TextPart)
        assert first.text == INIT_PROMPT + "\n\nThe user adds: stress the tests"
        assert "AGENTS.md" in first.text
        assert asked.parts[1:] == (link,)
