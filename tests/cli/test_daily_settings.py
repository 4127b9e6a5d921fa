"""``--no-project-instructions`` and ``--system-prompt-file``: flag > environment > default, and a bad value is a
usage error (exit 2) naming the flag or variable, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.cli._main import _parser
from acp_server.config import Settings, settings_from_args


def _settings(*argv: str, **env: str) -> Settings:
    parser = _parser()
    return settings_from_args(parser, parser.parse_args(list(argv)), env)


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str, **env: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        _settings(*argv, **env)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_project_instructions_are_on_unless_turned_off() -> None:
    assert _settings().no_project_instructions is False
    assert _settings("--no-project-instructions").no_project_instructions is True
    assert _settings(ACP_SERVER_NO_PROJECT_INSTRUCTIONS="yes").no_project_instructions is True
    assert _settings(ACP_SERVER_NO_PROJECT_INSTRUCTIONS=" 0 ").no_project_instructions is False
    assert _settings("--no-project-instructions", ACP_SERVER_NO_PROJECT_INSTRUCTIONS="0").no_project_instructions


def test_an_unreadable_switch_in_the_environment_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, ACP_SERVER_NO_PROJECT_INSTRUCTIONS="maybe")
    assert "ACP_SERVER_NO_PROJECT_INSTRUCTIONS" in err and "must be 1, true, yes, on, or 0, false, no, off" in err


def test_the_system_prompt_file_is_read_at_start(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text("Be brief. {braces} stay.\n")
    assert _settings("--system-prompt-file", str(tmp_path / "p.md")).system_prompt == "Be brief. {braces} stay.\n"
    assert _settings(ACP_SERVER_SYSTEM_PROMPT_FILE=str(tmp_path / "p.md")).system_prompt is not None
    assert _settings().system_prompt is None
    assert "Be brief" not in repr(_settings("--system-prompt-file", str(tmp_path / "p.md")))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read it"),
        (b"", "it is empty"),
        (b"\xff\xfe", "it is not UTF-8 text"),
        (b"x" * (256 * 1024 + 1), "it is over 256 KiB"),
    ],
)
def test_a_bad_system_prompt_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, problem: str
) -> None:
    path = tmp_path / "prompt.md"
    if content is not None:
        path.write_bytes(content)
    err = _usage_error(capsys, "--system-prompt-file", str(path))
    assert "--system-prompt-file" in err and problem in err
