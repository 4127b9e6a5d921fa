"""``config.was_given``: a setting is "asked for" when its flag is given or its environment variable is non-empty,
the same test the resolution applies, on the top-level parser and on a subcommand (whose defaults are suppressed)."""

from __future__ import annotations

import pytest

from acp_server.cli._main import _parser
from acp_server.config import settings_from_args, was_given


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, False),
        ([], {"ACP_SERVER_LOG_LEVEL": ""}, False),  # an empty variable is not a value (as in the resolution)
        ([], {"ACP_SERVER_LOG_LEVEL": "debug"}, True),
        (["--log-level", "ERROR"], {}, True),
        (["ask", "hi"], {}, False),
        (["ask", "--log-level", "ERROR", "hi"], {}, True),
        (["ask", "hi"], {"ACP_SERVER_LOG_LEVEL": "info"}, True),
    ],
)
def test_a_setting_is_given_by_its_flag_or_a_non_empty_variable(
    argv: list[str], env: dict[str, str], expected: bool
) -> None:
    args = _parser().parse_args(argv)
    assert was_given(args, "log_level", env) is expected


def test_it_agrees_with_the_resolution() -> None:
    """Given exactly when the resolved value differs from the default one would get without it."""
    parser = _parser()
    for env in ({}, {"ACP_SERVER_DEFAULT_MODE": ""}, {"ACP_SERVER_DEFAULT_MODE": "read-only"}):
        args = parser.parse_args([])
        resolved = settings_from_args(parser, args, env).default_mode
        assert was_given(args, "default_mode", env) is (resolved == "read-only")


def test_the_environment_is_read_when_none_is_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _parser().parse_args([])
    monkeypatch.setenv("ACP_SERVER_DEFAULT_MODE", "accept-edits")
    assert was_given(args, "default_mode") is True
    monkeypatch.delenv("ACP_SERVER_DEFAULT_MODE")
    assert was_given(args, "default_mode") is False
