"""The one ``Retry-After`` parser (``acp_server.retry_after``), used by the pipeline and the SDK client: every rule
is pinned here, including the two on which the former copies disagreed (a date without a zone, a negative delay).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx2
import pytest

from acp_server.retry_after import parse_retry_after, retry_after_from_headers

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def at(offset_s: float) -> str:
    """An IMF-fixdate ``offset_s`` after :data:`NOW`."""
    return format_datetime(NOW + timedelta(seconds=offset_s), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0.0),
        ("1", 1.0),
        (" 30 ", 30.0),  # surrounding whitespace is not part of the value
        ("86400", 86400.0),  # no cap here: callers cap (the pipeline at 5 min)
        ("007", 7.0),
        (None, None),
        ("", None),
        ("   ", None),
        ("soon", None),
    ],
)
def test_delta_seconds_are_ascii_digits(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


@pytest.mark.parametrize("value", ["-1", "-0", "+5", "0.5", "2.5", ".5", "1e3", "inf", "nan", "1_000", "٣", "1 2"])
def test_anything_else_numeric_is_ignored_not_clamped(value: str) -> None:
    """RFC 9110: delta-seconds is ``1*DIGIT``; a negative (former disagreement: one copy gave 0) or fractional
    value is not one, so it is ignored like any unreadable value."""
    assert parse_retry_after(value) is None


def test_a_delay_beyond_float_range_is_ignored() -> None:
    assert parse_retry_after("9" * 400) is None


@pytest.mark.parametrize(
    "value",
    [
        at(42),  # IMF-fixdate
        "Monday, 30-Nov-26 12:00:42 GMT",  # obsolete RFC 850
        "Mon Nov 30 12:00:42 2026",  # asctime: no zone
        "Mon, 30 Nov 2026 12:00:42 -0000",  # "-0000": no zone
    ],
    ids=["imf-fixdate", "rfc850", "asctime", "minus-zero"],
)
def test_an_http_date_is_seconds_from_now_and_a_zoneless_one_is_gmt(value: str) -> None:
    """Former disagreement: one copy ignored a date without a zone; RFC 9110 dates are all GMT."""
    assert parse_retry_after(value, now=NOW.timestamp()) == 42.0


def test_a_date_with_an_explicit_offset_is_honoured() -> None:
    assert parse_retry_after("Mon, 30 Nov 2026 14:00:42 +0200", now=NOW.timestamp()) == 42.0


def test_a_date_in_the_past_is_zero() -> None:
    assert parse_retry_after(at(-3600), now=NOW.timestamp()) == 0.0
    assert parse_retry_after(format_datetime(datetime(2000, 1, 1, tzinfo=UTC), usegmt=True)) == 0.0


def test_an_impossible_date_is_ignored() -> None:
    assert parse_retry_after("Mon, 31 Feb 2026 12:00:00 GMT") is None
    assert parse_retry_after("Mon, 30 Nov 99999 12:00:00 GMT") is None


def test_now_defaults_to_the_wall_clock() -> None:
    seconds = parse_retry_after(format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True))
    assert seconds is not None and 28 <= seconds <= 30


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "4"}, 4.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "1.5"}, 0.0015),  # milliseconds may be fractional
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # ms wins
        ({"retry-after-ms": "nope", "retry-after": "4"}, 4.0),  # unusable ms: fall back to Retry-After
        ({"retry-after-ms": "-5", "retry-after": "4"}, 4.0),  # negative ms is ignored too, not clamped
        ({"retry-after-ms": "inf", "retry-after": "4"}, 4.0),
        ({"retry-after-ms": "-5"}, None),
        ({"retry-after": "2.5"}, None),
        ({"retry-after": "-3"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_headers_prefer_retry_after_ms(headers: dict[str, str] | None, expected: float | None) -> None:
    assert retry_after_from_headers(headers) == expected


def test_headers_of_a_response_are_read_case_insensitively_and_dates_use_now() -> None:
    headers = httpx2.Headers({"Retry-After": at(10)})
    assert retry_after_from_headers(headers, now=NOW.timestamp()) == 10.0
    assert retry_after_from_headers(httpx2.Headers({"Retry-After-Ms": "100"})) == 0.1
