"""A controllable turn runner and small helpers for the bridge tests.

The runner's behaviour is chosen by the prompt's text:
- ``"ok:<name>"`` returns ``end_turn`` at once, ``"fail:<name>"`` raises :class:`Boom` at once;
- ``"sleep:<seconds>:<name>"`` sleeps (virtual time) then returns ``end_turn``;
- anything else blocks until the test calls :meth:`ScriptedRunner.finish` or :meth:`ScriptedRunner.fail`.
Every prompt appends ``user <text>`` to the conversation when it starts, ``assistant <text>`` if it succeeds, and
sends two events to its stream as it starts: ``TextChunk("<text>/1")``, ``TextChunk("<text>/2")``.
"""

from __future__ import annotations

import anyio

from acp_server.bridge import PromptStream, SessionEntry
from acp_server.domain import Emit, Message, Prompt, PromptEnded, PromptEvent, StopReason, TextChunk, TextPart


class Boom(Exception):
    """The failure a scripted prompt raises."""


def prompt(text: str) -> Prompt:
    return Prompt((TextPart(text),))


async def read_all(stream: PromptStream) -> list[PromptEvent]:
    """Everything a prompt's stream yields, to its end (the reader side of ``handle.events``).

    Bounded in (virtual) time: on a mock clock, a stream that never ends fails at once instead of hanging."""
    with anyio.fail_after(24 * 3600):
        return [event async for event in stream]


def texts(events: list[PromptEvent]) -> list[str]:
    return [event.text for event in events if isinstance(event, TextChunk)]


def outcomes(events: list[PromptEvent]) -> list[PromptEnded]:
    return [event for event in events if isinstance(event, PromptEnded)]


class ScriptedRunner:
    """A ``TurnRunner`` the test drives; it records what started, what was cancelled and what finished."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self._gates: dict[str, anyio.Event] = {}
        self._outcomes: dict[str, StopReason | BaseException] = {}

    def _gate(self, name: str) -> anyio.Event:
        return self._gates.setdefault(name, anyio.Event())

    def finish(self, name: str, stop_reason: StopReason = "end_turn") -> None:
        self._outcomes[name] = stop_reason
        self._gate(name).set()

    def fail(self, name: str, error: BaseException | None = None) -> None:
        self._outcomes[name] = error if error is not None else Boom(name)
        self._gate(name).set()

    async def __call__(self, session: SessionEntry, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
        name = prompt.title
        self.started.append(name)
        session.conversation.messages.append(Message("user", name))
        await emit(TextChunk(f"{name}/1"))
        await emit(TextChunk(f"{name}/2"))
        try:
            if name.startswith("fail:"):
                raise Boom(name)
            if name.startswith("sleep:"):
                await anyio.sleep(float(name.split(":")[1]))
            elif not name.startswith("ok:"):
                await self._gate(name).wait()
                outcome = self._outcomes[name]
                if isinstance(outcome, BaseException):
                    raise outcome
                self.finished.append(name)
                session.conversation.messages.append(Message("assistant", name))
                return outcome
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(name)
            raise
        self.finished.append(name)
        session.conversation.messages.append(Message("assistant", name))
        return "end_turn"


def history(session: SessionEntry) -> list[str]:
    return [f"{message.role} {message.content}" for message in session.conversation.messages]
