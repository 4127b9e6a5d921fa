"""An endpoint's "this request is too long for the context window" refusal, recognised whatever server sent it.

One table (:data:`CONTEXT_REFUSALS`) of what the common servers say, matched case-insensitively in the error's
text (the provider's message and body); a number the refusal states as the window is learned from it
(:data:`WINDOW_PATTERNS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ...pipeline import ModelHTTPError

__all__ = ["CONTEXT_REFUSALS", "WINDOW_PATTERNS", "ContextRefusal", "context_refusal"]

CONTEXT_REFUSALS: tuple[tuple[str, str], ...] = (
    ("context_length_exceeded", "OpenAI's error code (also OpenRouter, Groq, DeepSeek, LiteLLM)"),
    ("maximum context length", "OpenAI, vLLM, DeepSeek: \"This model's maximum context length is N tokens\""),
    ("context length exceeded", "generic proxies"),
    ("too many tokens", "Azure OpenAI, Together, generic"),
    ("prompt is too long", "Anthropic: \"prompt is too long: N tokens > M maximum\""),
    ("exceeds the available context size", "llama.cpp server: \"the request exceeds the available context size\""),
    ("exceed_context_size_error", "llama.cpp server's error type"),
    ("exceeds the context window", "generic"),
    ("context window exceeded", "generic"),
    ("input is too long", "text-generation-inference, Bedrock"),
    ("max_new_tokens` must be <=", "text-generation-inference: \"`inputs` tokens + `max_new_tokens` must be <= N\""),
    ("max_new_tokens must be <=", "text-generation-inference's wording without the backticks"),
    ("reduce the length of the messages", "OpenAI's advice, also Groq"),
    ("exceeds the maximum number of tokens", "Gemini's OpenAI-compatible endpoint"),
    ("too large for model", "Mistral: \"too large for model with N maximum context length\""),
    ("context length of only", "Ollama, LM Studio"),
)
"""(what the error says, who says it): a 4xx error with one of these is a refusal for length."""

WINDOW_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"available context size \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"n_ctx[\"']?\s*[:=]\s*(\d+)", re.IGNORECASE),
    re.compile(r"tokens? > (\d+) maximum", re.IGNORECASE),
    re.compile(r"with (\d+) maximum context length", re.IGNORECASE),
    re.compile(r"maximum number of tokens allowed \((\d+)\)", re.IGNORECASE),
    re.compile(r"context length of only (\d+)", re.IGNORECASE),
    re.compile(r"inputs`? tokens \+ `?max_new_tokens`? must be <= (\d+)", re.IGNORECASE),
)
"""Where the refusals above state the window; the first match is taken. Each names the context (a bare
``must be <= N`` could be any field's bound: ``max_tokens must be <= 4096`` is no window)."""

_REFUSING_STATUSES = frozenset({400, 413, 422})


@dataclass(frozen=True, slots=True)
class ContextRefusal:
    """The endpoint refused a request as too long; ``window``: the window it stated, if it did."""

    window: int | None


def _texts(exc: BaseException) -> Iterator[str]:
    """The error's own text, then its causes' messages and bodies (the SDK keeps the provider's body there)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 4:
        yield str(current)
        for name in ("message", "body"):
            value = getattr(current, name, None)
            if value is not None:
                yield str(value)
        response = getattr(current, "response", None)
        text = getattr(response, "text", None) if response is not None else None
        if isinstance(text, str):
            yield text[:4096]
        current, seen = current.__cause__, seen + 1


def context_refusal(exc: BaseException) -> ContextRefusal | None:
    """The refusal ``exc`` is, or None when it is any other failure."""
    if not isinstance(exc, ModelHTTPError) or exc.status not in _REFUSING_STATUSES:
        return None
    try:
        text = "\n".join(_texts(exc)).lower()
    except Exception:  # a body whose str() fails is not a refusal we can read
        return None
    if not any(phrase in text for phrase, _ in CONTEXT_REFUSALS):
        return None
    for pattern in WINDOW_PATTERNS:
        match = pattern.search(text)
        if match is not None:
            window = int(match.group(1))
            return ContextRefusal(window if window > 0 else None)
    return ContextRefusal(None)
