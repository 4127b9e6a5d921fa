"""The SSE reader (``split_events``): data lines joined per event, comments and other fields ignored, CR / LF / CRLF,
and the same events whatever the body's split into network reads."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_server.pipeline._sse import split_events


def events_of(*pieces: bytes) -> list[bytes]:
    """Feed ``pieces`` one by one, then the end of the body; every event in order."""
    out: list[bytes] = []
    pending = b""
    for piece in pieces:
        events, pending = split_events(pending, piece)
        out += events
    events, _ = split_events(pending, b"", final=True)
    return out + events


def test_one_data_line_per_event() -> None:
    assert events_of(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [b'{"a":1}', b"[DONE]"]


def test_data_lines_of_one_event_are_joined_with_newlines_and_one_leading_space_is_dropped() -> None:
    assert events_of(b"data: one\ndata:two\ndata:  three\ndata\n\n") == [b"one\ntwo\n three\n"]


def test_comments_other_fields_and_empty_events_are_not_events() -> None:
    body = b": keep-alive\n\nevent: ping\nid: 7\nretry: 10\n\n\n\n: x\ndata: real\nid: 8\n\ndatum: no\n\n"
    assert events_of(body) == [b"real"]


def test_crlf_cr_and_lf_all_end_lines() -> None:
    assert events_of(b"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\n\n") == [b"a", b"b", b"c", b"d"]


def test_a_crlf_split_between_two_reads_is_one_line_end() -> None:
    assert events_of(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [b"a\nb"]
    assert events_of(b"data: a\r", b"\r") == [b"a"]  # CR then CR: a line end, then an empty line


def test_an_event_cut_by_the_end_of_the_body_is_dropped() -> None:
    assert events_of(b"data: whole\n\ndata: half\n") == [b"whole"]
    assert events_of(b"data: whole\r\n\r") == [b"whole"]  # the final CR ends the empty line all the same


def test_what_is_kept_back_is_only_the_unfinished_event() -> None:
    events, pending = split_events(b"", b"data: a\n\ndata: b")
    assert (events, pending) == ([b"a"], b"data: b")
    events, pending = split_events(pending, b"c\n\n")
    assert (events, pending) == ([b"bc"], b"")


@given(st.data())
def test_any_split_of_a_body_gives_the_events_of_the_whole(data: st.DataObject) -> None:
    line = st.sampled_from([b"data: x", b"data:{}", b"data", b": c", b"event: e", b"", b"data: \xff"])
    ending = st.sampled_from([b"\n", b"\r\n", b"\r"])  # mixed within one body, too
    body = b"".join(data.draw(st.lists(st.tuples(line, ending).map(b"".join), max_size=12)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    assert events_of(*pieces) == events_of(body)
