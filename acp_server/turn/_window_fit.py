"""Whether a model's window can hold a session's requests at all, and if not, what takes the room.

Invariant: when what every request of the session holds — the instructions (the system prompt with its environment
and project files), the tools its mode offers (built-in, then each MCP server's), a minimal prompt of
:data:`MIN_PROMPT_TOKENS` and the answer's room (:attr:`Budget.reserve`) — is larger than the window, every prompt
fails at once with :class:`ContextWindowTooSmallError` naming each part's tokens and what would help; nothing is
sent, no compaction is tried (it cannot shrink any of these parts).
"""

from __future__ import annotations

from ..modes import READ_ONLY_MODE
from ..tools.registry import ToolSet
from ._exceptions import ContextWindowTooSmallError
from .context import MESSAGE_TOKENS, Budget, json_tokens, text_tokens

__all__ = ["MIN_PROMPT_TOKENS", "window_problem"]

MIN_PROMPT_TOKENS = 100
"""The prompt a window must have room for beside what every request holds (a few lines of text)."""

_SERVER_FLAGS = (
    "llama.cpp's llama-server: -c / --ctx-size; vLLM: --max-model-len; Ollama: num_ctx or OLLAMA_CONTEXT_LENGTH; "
    "LM Studio: the model's context length"
)


def _tool_parts(tools: ToolSet, offered: tuple[str, ...], budget: Budget) -> list[tuple[str, int]]:
    """The tokens of the offered tools' definitions: the built-ins', then each MCP server's, in offer order."""
    by_source: dict[str | None, list[str]] = {}
    for name in offered:
        tool = tools.get(name)
        by_source.setdefault(None if tool is None else tool.source, []).append(name)
    parts: list[tuple[str, int]] = []
    for source, names in by_source.items():
        what = "built-in tools" if source is None else f'MCP server "{source}"'
        parts.append((what, budget.estimate(json_tokens(tools.entries(names)))))
    return parts


def window_problem(
    system: str, instructions: str, tools: ToolSet, mode: str, budget: Budget
) -> ContextWindowTooSmallError | None:
    """The error every prompt of a session in ``mode`` fails with because ``budget``'s window cannot hold its
    ``system`` prompt (``instructions`` being the configured part of it), its ``tools`` and a minimal prompt beside
    the answer's room; None when it can, or when the window is unknown."""
    window = budget.window
    if window is None:
        return None
    own = min(text_tokens(instructions), text_tokens(system))
    parts = [("instructions", budget.estimate(own + MESSAGE_TOKENS))]
    rest = text_tokens(system) - own
    if rest > 0:
        parts.append(("environment and project instructions", budget.estimate(rest)))
    tool_parts = _tool_parts(tools, tools.offered(mode), budget)
    parts += tool_parts
    fixed = sum(tokens for _, tokens in parts)
    needed = fixed + MIN_PROMPT_TOKENS + MESSAGE_TOKENS + budget.reserve
    if needed <= window:
        return None
    advice = [f"a larger window, at least {needed} tokens (the model server's flag: {_SERVER_FLAGS})"]
    builtin = next((tokens for what, tokens in tool_parts if what == "built-in tools"), 0)
    if mode != READ_ONLY_MODE:
        read_only = next(
            (t for w, t in _tool_parts(tools, tools.offered(READ_ONLY_MODE), budget) if w == "built-in tools"), 0
        )
        if read_only < builtin:
            advice.append(f"read-only mode (its built-in tools take {read_only} tokens instead of {builtin})")
    mcp = [(what, tokens) for what, tokens in tool_parts if what.startswith("MCP server")]
    if mcp:
        advice.append(f"fewer MCP servers (their tools take {sum(t for _, t in mcp)} tokens)")
    listed = ", ".join(f"{what} {tokens} tokens" for what, tokens in parts)
    text = (
        f"The model's context window ({window} tokens) is too small for this session: every request holds "
        f"{listed}; with {budget.reserve} kept for the answer and {MIN_PROMPT_TOKENS} for a minimal prompt that is "
        f"{needed} tokens. What would help: {'; '.join(advice)}."
    )
    parts += [("a minimal prompt", MIN_PROMPT_TOKENS + MESSAGE_TOKENS), ("the answer's room", budget.reserve)]
    return ContextWindowTooSmallError(window, needed, tuple(parts), tuple(advice), text)
