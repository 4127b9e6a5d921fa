"""Which elicitation modes a client advertised (``clientCapabilities.elicitation``): an object per mode, anything
malformed reads as absent, so a malformed capability never makes the agent send ``elicitation/create``."""

from __future__ import annotations

from typing import Any

import pytest

from acp_server.acp._editor import ClientCapabilities


@pytest.mark.parametrize(
    ("caps", "modes"),
    [
        ({"elicitation": {"form": {}}}, {"form"}),
        ({"elicitation": {"form": {}, "url": {}}}, {"form", "url"}),
        ({"elicitation": {"url": {"_meta": {}}}}, {"url"}),
        ({"elicitation": {"form": True, "url": None}}, set()),
        ({"elicitation": {}}, set()),
        ({"elicitation": "form"}, set()),
        ({}, set()),
        (None, set()),
    ],
)
def test_the_advertised_modes(caps: Any, modes: set[str]) -> None:
    assert ClientCapabilities(caps).elicitation == frozenset(modes)
