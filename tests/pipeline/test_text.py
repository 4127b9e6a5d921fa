"""Model text without lone surrogates: halves joined across pieces, lone halves replaced (``_text.py``)."""

from __future__ import annotations

import pytest

from acp_server.pipeline._exceptions import redact
from acp_server.pipeline._text import TextJoiner, clean_text

HIGH, LOW = "\ud83d", "\ude00"
EMOJI = "\U0001f600"


def test_a_pair_split_across_two_pieces_joins_into_its_character() -> None:
    joiner = TextJoiner()
    assert joiner.push("smile " + HIGH) == "smile "
    assert joiner.push(LOW + " done") == EMOJI + " done"
    assert joiner.flush() == ""


def test_a_piece_that_is_only_the_high_half_is_held_back_whole() -> None:
    joiner = TextJoiner()
    assert joiner.push(HIGH) == ""
    assert joiner.push(LOW) == EMOJI


@pytest.mark.parametrize(
    ("pieces", "out"),
    [
        ((LOW,), "\ufffd"),  # a low half with nothing before it
        ((HIGH, "a"), "\ufffda"),  # a high half followed by something else
        ((HIGH, HIGH, LOW), "\ufffd" + EMOJI),
        (("a" + LOW + HIGH + "b",), "a\ufffd\ufffdb"),  # reversed halves inside one piece
        ((HIGH,), "\ufffd"),  # held at the end: flushed as a replacement
        (("plain ascii", " é ü"), "plain ascii é ü"),
    ],
)
def test_lone_halves_become_the_replacement_character(pieces: tuple[str, ...], out: str) -> None:
    joiner = TextJoiner()
    text = "".join(joiner.push(p) for p in pieces) + joiner.flush()
    assert text == out
    text.encode("utf-8")  # never raises: no lone surrogate left


def test_clean_text_and_redact_never_return_a_lone_surrogate() -> None:
    assert clean_text(HIGH + LOW + LOW) == EMOJI + "\ufffd"
    assert redact("quota " + HIGH) == "quota \ufffd"
