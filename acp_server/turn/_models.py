"""The models a session may pick here, and what is known of their context windows.

Invariants: the default model is always offered, first; the offered list changes at most once, from the default
alone to the final list (``--models``, else what the endpoint's ``GET /v1/models`` listed, else the default alone
when that failed); a session's stored choice that is not offered reads as the default (:meth:`ModelCatalog.resolve`)
and is kept, so a list that arrives later can make it apply again. A context window is never guessed: it is
configured, reported by the endpoint's model list, or the documented limit of a well-known model family.

A window an endpoint states when it refuses a request as too long is learned per model, and only where it is
plausible: never below :data:`MIN_LEARNED_WINDOW`, nor below the largest request the endpoint already accepted for
that model from this process; a later request accepted above it forgets it. So one lying refusal (a gateway's
"maximum context length is 10 tokens") costs at most the prompt it answered, never every later session's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "FAMILY_CONTEXT_WINDOWS",
    "MIN_LEARNED_WINDOW",
    "REPORTED_WINDOW_FIELDS",
    "ModelCatalog",
    "family_context_window",
    "reported_window",
]

logger = logging.getLogger("acp_server.turn")

MIN_LEARNED_WINDOW = 1_024
"""The smallest window a refusal is believed to state (below it, the refusal still fails its own prompt, but teaches
nothing)."""

FAMILY_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5-chat", 128_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("claude-3", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-haiku-4", 200_000),
)
"""Documented context windows of hosted model families, most specific first: a name matches a family when it is
the family or starts with it followed by ``-`` (dated and sized variants), after any ``provider/`` prefix."""

REPORTED_WINDOW_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("context_length",), "OpenRouter, Together, DeepInfra; Ollama's native /api/ps (its /v1/models has none)"),
    (("top_provider", "context_length"), "OpenRouter (the routed provider's window)"),
    (("context_window",), "Groq"),
    (("max_model_len",), "vLLM, SGLang: the window the server was started with (--max-model-len)"),
    (("meta", "n_ctx"), "llama.cpp's llama-server: the window it serves (-c / --ctx-size)"),
    (("max_context_length",), "LM Studio's /api/v0 and /api/v1 model lists, Mistral (its /v1/models: none)"),
)
"""Where servers put a model's context window in their model list entries: the key path, and who uses it; the first
positive integer found wins. A model's trained maximum (llama-server's ``meta.n_ctx_train``, Ollama's
``model_info.<arch>.context_length``) is not the window it is served with, so it is never read."""


def family_context_window(model: str) -> int | None:
    """The documented window of ``model``'s family (:data:`FAMILY_CONTEXT_WINDOWS`), None when it is not one."""
    name = model.rsplit("/", 1)[-1].lower()
    for family, window in FAMILY_CONTEXT_WINDOWS:
        if name == family or name.startswith(family + "-"):
            return window
    return None


def reported_window(entry: Mapping[str, object]) -> int | None:
    """The window a model list entry reports (:data:`REPORTED_WINDOW_FIELDS`), None when it reports none."""
    for path, _ in REPORTED_WINDOW_FIELDS:
        value: object = entry
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class ModelCatalog:
    """The models offered to sessions (``available``, the default first) and their context windows.

    ``configured``: the ``--models`` list (then the endpoint is never asked); ``context_window``: the
    ``--context-window`` that applies to every model (None: reported or family windows).
    """

    def __init__(self, default: str, configured: Sequence[str] = (), *, context_window: int | None = None) -> None:
        self.default = default
        self._context_window = context_window
        self._reported: dict[str, int] = {}
        self._learned: dict[str, int] = {}  # windows the endpoint stated when it refused a request as too long
        self._accepted: dict[str, int] = {}  # the largest request (tokens) the endpoint accepted, per model
        self._sole: tuple[str, int] | None = None  # the one model a one-model listing named, and its window
        self._available: tuple[str, ...] = (default,)
        self._final = False
        self.configured = bool(configured)
        if configured:
            self._settle(configured)

    @property
    def available(self) -> tuple[str, ...]:
        """What a session may pick now: the default first, then the others in the order they were listed."""
        return self._available

    @property
    def final(self) -> bool:
        """The list will not change any more (configured, listed by the endpoint, or the listing gave up)."""
        return self._final

    def offers(self, model: str) -> bool:
        return model in self._available

    def resolve(self, model: str | None) -> str:
        """The model a session's next request uses: its choice when offered here, else the default."""
        return model if model is not None and model in self._available else self.default

    def context_window(self, model: str) -> int | None:
        """``--context-window``, else the window the endpoint stated when it refused a request, else the one its
        model list reported — for any name when the list held exactly one model (llama.cpp's servers serve their
        one model whatever name a request asks for) —, else the family's; None when unknown."""
        if self._context_window is not None:
            return self._context_window
        known = self._learned.get(model) or self._reported.get(model)
        if known is None and self._sole is not None:
            return self._sole[1]  # a server listing one model serves it whatever name is asked
        return known or family_context_window(model)

    def budget_window(self, model: str) -> int | None:
        """The window requests to ``model`` are fitted into: :meth:`context_window`, or the window the endpoint
        stated in a refusal when that is smaller (the endpoint's word beats a configured or documented one)."""
        known, learned = self.context_window(model), self._learned.get(model)
        return learned if known is None or (learned is not None and learned < known) else known

    def learn_window(self, model: str, window: int) -> bool:
        """The endpoint refused a request to ``model`` stating ``window``: kept for this process when plausible (at
        least :data:`MIN_LEARNED_WINDOW` and the largest request it accepted for ``model``). Whether it was kept."""
        floor = max(MIN_LEARNED_WINDOW, self._accepted.get(model, 0))
        if window < floor:
            logger.warning(
                "the endpoint stated a context window of %d tokens for %r: not believed (it is below %d tokens%s)",
                window,
                model,
                floor,
                ", a request it accepted" if floor > MIN_LEARNED_WINDOW else "",
            )
            return False
        self._learned[model] = window
        return True

    def note_accepted(self, model: str, tokens: int) -> None:
        """The endpoint accepted a request of ``tokens`` to ``model``: no later refusal states a window below it, and
        a learned window below it is forgotten (the refusal that stated it was wrong, or the server changed)."""
        if tokens > self._accepted.get(model, 0):
            self._accepted[model] = tokens
        learned = self._learned.get(model)
        if learned is not None and tokens > learned:
            del self._learned[model]
            logger.info(
                "the endpoint accepted %d tokens for %r: the %d-token window a refusal stated is forgotten",
                tokens,
                model,
                learned,
            )

    def _settle(self, names: Iterable[str]) -> None:
        seen = {self.default}
        listed = [self.default]
        for name in names:
            if name and name not in seen:
                seen.add(name)
                listed.append(name)
        self._available = tuple(listed)
        self._final = True

    def learn(self, entries: Iterable[Mapping[str, object]]) -> None:
        """Take the endpoint's model list (``GET /v1/models`` entries: ``id``, maybe a window); once only."""
        if self.final:
            return
        names: list[str] = []
        for entry in entries:
            name = entry.get("id")
            if isinstance(name, str) and name:
                names.append(name)
                window = reported_window(entry)
                if window is not None:
                    self._reported[name] = window
        if len(names) == 1 and names[0] in self._reported:
            self._sole = (names[0], self._reported[names[0]])
            if names[0] != self.default:
                logger.info(
                    "models: the endpoint lists one model, %r, with a %d-token window: that window applies to any "
                    "model name asked (%r by default), as such a server serves its one model whatever the name",
                    names[0],
                    self._sole[1],
                    self.default,
                )
        self._settle(names)

    def give_up(self) -> None:
        """The endpoint's list could not be had: the default alone, for good."""
        if not self.final:
            self._settle(())
