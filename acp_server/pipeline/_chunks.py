"""The chunk parser: one decoded ``data:`` event of a chat completion stream into deltas, and the completion rules.

Invariants: the deltas :meth:`Attempt.read` returns carry no lone surrogate (one joiner per channel: answer,
reasoning); an attempt is complete only once every choice seen has its finish reason; a value that is not a
``chat.completion.chunk`` is ``invalid_chunk`` (:class:`StreamContentError`), ignored once the answer is complete.
"""

from __future__ import annotations

from typing import Any

from ._exceptions import Phase, StreamContentError
from ._text import TextJoiner
from ._types import Delta, ToolCallFragment

__all__ = ["Attempt"]


def _invalid_chunk(what: str, chunks: int) -> StreamContentError:
    return StreamContentError(
        f"The model stream sent a chunk that is not a chat.completion.chunk ({what})",
        reason="invalid_chunk",
        chunks_received=chunks,
    )


def _tool_calls(calls: object, chunks: int) -> tuple[ToolCallFragment, ...]:
    """The fragments of a delta's ``tool_calls``; ``invalid_chunk`` for what is not a list of tool call pieces."""
    if not isinstance(calls, list):
        raise _invalid_chunk("'tool_calls' is not a list", chunks)
    out: list[ToolCallFragment] = []
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            raise _invalid_chunk("a tool call is not an object", chunks)
        function = call.get("function")
        if function is None:
            function = {}
        elif not isinstance(function, dict):
            raise _invalid_chunk("a tool call's 'function' is not an object", chunks)
        index, call_id = call.get("index"), call.get("id")
        name, arguments = function.get("name"), function.get("arguments")
        if any(v is not None and not isinstance(v, str) for v in (call_id, name, arguments)):
            raise _invalid_chunk("a tool call's 'id', 'name' or 'arguments' is not a string", chunks)
        index = index if isinstance(index, int) and not isinstance(index, bool) else position
        out.append(ToolCallFragment(index, call_id, name, arguments or ""))
    return tuple(out)


class Attempt:
    """Progress of one attempt, as the completion rules and the turn-level error mapping need it.

    Invariant: the deltas ``read`` returns carry no lone surrogate (one joiner per channel).
    """

    __slots__ = (
        "_finished",
        "_open",
        "_reasoning",
        "_text",
        "chunks",
        "finish_reason",
        "opened",
        "usage",
        "yielded",
    )

    def __init__(self) -> None:
        self.opened = False  # the response headers arrived (a stream object exists)
        self.chunks = 0  # raw chunks received
        self.yielded = 0  # deltas handed to the caller
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None  # the last ``usage`` a chunk carried
        self._open: set[int] = set()  # choices seen without their finish reason yet
        self._finished: set[int] = set()
        self._text = TextJoiner()
        self._reasoning = TextJoiner()

    @property
    def phase(self) -> Phase:
        if not self.opened:
            return "request"
        return "mid_stream" if self.chunks else "before_first_chunk"

    def complete(self) -> bool:
        """Every choice seen has its finish reason (and there was one)."""
        return bool(self._finished) and not self._open

    def read(self, chunk: Any) -> list[Delta]:
        """The deltas of one decoded ``data:`` event; raises ``invalid_chunk`` for what is not a chunk (ignored once
        complete)."""
        try:
            return self._read(chunk)
        except StreamContentError:
            if self.complete():
                return []
            raise

    def _read(self, chunk: Any) -> list[Delta]:
        if not isinstance(chunk, dict):
            raise _invalid_chunk(f"a JSON {type(chunk).__name__}", self.chunks)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if choices is None:  # ``{}``, or a usage-only chunk
            return []
        if not isinstance(choices, list):
            raise _invalid_chunk("'choices' is not a list", self.chunks)
        out: list[Delta] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise _invalid_chunk("a choice is not an object", self.chunks)
            index = choice.get("index", 0)
            index = index if isinstance(index, int) else 0
            finish = choice.get("finish_reason")
            if finish is not None and not isinstance(finish, str):
                raise _invalid_chunk("'finish_reason' is not a string", self.chunks)
            delta = choice.get("delta")
            if delta is not None:
                if not isinstance(delta, dict):
                    raise _invalid_chunk("'delta' is not an object", self.chunks)
                text = delta.get("content")
                if text is not None and not isinstance(text, str):
                    raise _invalid_chunk("'content' is not a string", self.chunks)
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                calls = delta.get("tool_calls")
                tool_calls = _tool_calls(calls, self.chunks) if calls else ()
                text = self._text.push(text) if text else ""
                reasoning = self._reasoning.push(reasoning) if isinstance(reasoning, str) and reasoning else ""
                if text or reasoning or tool_calls:
                    out.append(Delta(text, reasoning, tool_calls))
            if finish:
                self.finish_reason = finish
                self._finished.add(index)
                self._open.discard(index)
            elif index not in self._finished:
                self._open.add(index)
        return out

    def flush(self) -> Delta | None:
        """What the joiners still hold (a lone high half each, as U+FFFD), once the answer is complete."""
        text, reasoning = self._text.flush(), self._reasoning.flush()
        return Delta(text=text, reasoning=reasoning) if text or reasoning else None
