"""The configuration file: every setting of the one table can live there under its flag's name; flags > environment >
file > defaults; profiles; a bad file is a usage error naming file, line and key (exit 2, no traceback); a file
holding a key that others may read is refused; ``config show`` prints each effective value and its source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.cli._main import _parser
from acp_server.config import OPTIONS, SERVE_OPTIONS, Settings, SettingsError, config_key, resolve_settings

KEY = "sk-test-secret-0123456789"


def _write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def _settings(argv: list[str], env: dict[str, str]) -> Settings:
    return resolve_settings(_parser().parse_args(argv), env)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_precedence_is_flag_then_environment_then_file_then_default(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", 'base-url = "http://file/v1"\nmodel = "file-model"\nmax-turn-requests = 7\n')
    env = {"ACP_SERVER_CONFIG": str(config), "OPENAI_MODEL": "env-model"}
    settings = _settings(["--base-url", "http://flag/v1"], env)
    assert (settings.base_url, settings.model, settings.max_turn_requests) == ("http://flag/v1", "env-model", 7)
    assert _settings([], {"ACP_SERVER_CONFIG": str(config)}).model == "file-model"
    assert _settings(["--config", str(config)], {}).base_url == "http://file/v1"
    assert _settings([], {"XDG_CONFIG_HOME": str(tmp_path / "none")}).base_url is None  # no default file: defaults


def test_the_default_path_is_under_xdg_config_home(tmp_path: Path) -> None:
    (tmp_path / "acp-server").mkdir()
    _write(tmp_path / "acp-server" / "config.toml", 'model = "xdg"\n')
    assert _settings([], {"XDG_CONFIG_HOME": str(tmp_path)}).model == "xdg"


def test_every_setting_of_the_table_can_live_in_the_file(tmp_path: Path) -> None:
    """Each option's key is accepted (its value's type checked by the option's own parser, not refused as unknown)."""
    for option in (*OPTIONS, *SERVE_OPTIONS):
        config = _write(tmp_path / "c.toml", f"{config_key(option)} = {'true' if option.parse is None else '1'}\n")
        try:
            _settings(["--config", str(config)], {})
        except SettingsError as exc:
            assert "unknown key" not in str(exc) and "must be true or false" not in str(exc), (option.flag, exc)


def test_lists_switches_and_numbers_take_their_toml_types(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.toml", 'models = ["a", "b"]\nno-persist = true\ncontext-window = 8192\nlog-level = "debug"\n'
    )
    settings = _settings(["--config", str(config)], {})
    assert (settings.models, settings.no_persist, settings.context_window, settings.log_level) == (
        ("a", "b"),
        True,
        8192,
        "DEBUG",
    )


def test_a_profile_wins_over_the_top_level(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.toml",
        'model = "top"\nbase-url = "http://top/v1"\n\n[profiles.local]\nmodel = "qwen"\n'
        '\n[profiles.other]\nmodel = "o"\n',
    )
    assert _settings(["--config", str(config), "--profile", "local"], {}).model == "qwen"
    assert _settings(["--config", str(config)], {"ACP_SERVER_PROFILE": "other"}).model == "o"
    assert _settings(["--config", str(config), "--profile", "local"], {}).base_url == "http://top/v1"
    with pytest.raises(SettingsError, match=r"no profile 'nope' \(its profiles: local, other\)"):
        _settings(["--config", str(config), "--profile", "nope"], {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('model = "m"\nbase-url = \n', r"c\.toml:2: not valid TOML"),
        ('model = "m"\n\nbase_url = "x"\n', r"c\.toml:3: base_url: unknown key"),
        ('model = "m"\ncontext-window = "big"\n', r"invalid value for .*c\.toml:2: context-window: 'big'"),
        ("model = 3\n", r"c\.toml:1: model: must be a string, not an integer"),
        ("no-persist = 1\n", r"c\.toml:1: no-persist: must be true or false"),
        ('[profiles.x]\nmodle = "m"\n', r"c\.toml:2: \[profiles\.x\] modle: unknown key"),
    ],
)
@pytest.mark.e2e  # starts acp_server as a process
def test_a_bad_file_is_a_usage_error_naming_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    config = _write(tmp_path / "c.toml", text)
    with pytest.raises(SettingsError, match=message):
        _settings(["--config", str(config)], {})
    done = _run("--config", str(config), "config", "show")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(config) in done.stderr


@pytest.mark.e2e  # starts acp_server as a process
def test_the_agent_itself_exits_2_on_a_bad_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", "max-turn-requests = 0\n")
    done = _run("--config", str(config))
    assert done.returncode == 2, done.stderr
    assert f"{config}:1: max-turn-requests" in done.stderr and "Traceback" not in done.stderr


def test_a_missing_file_named_explicitly_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="no such file"):
        _settings(["--config", str(tmp_path / "absent.toml")], {})


def test_a_file_holding_a_key_readable_by_others_is_refused_and_left_alone(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", f'api-key = "{KEY}"\n', mode=0o644)
    with pytest.raises(SettingsError, match=r"holds api-key but group or others may read it \(mode 0644\)") as caught:
        _settings(["--config", str(config)], {})
    assert KEY not in str(caught.value) and "chmod 600" in str(caught.value)
    assert config.stat().st_mode & 0o777 == 0o644
    config.chmod(0o600)
    assert _settings(["--config", str(config)], {}).api_key == KEY
    _write(tmp_path / "open.toml", 'model = "m"\n', mode=0o644)  # nothing secret: any mode
    assert _settings(["--config", str(tmp_path / "open.toml")], {}).model == "m"


def test_a_secret_in_a_bad_value_is_never_shown(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", 'store = "mysql://u:hunter2@h/db"\n')
    with pytest.raises(SettingsError) as caught:
        _settings(["--config", str(config)], {})
    assert "hunter2" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.e2e  # starts acp_server as a process
def test_config_show_prints_values_and_sources_with_secrets_masked(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", f'base-url = "http://file/v1"\napi-key = "{KEY}"\nmodel = "m"\n')
    done = _run(
        "config",
        "show",
        "--model",
        "flag-model",
        env={"ACP_SERVER_CONFIG": str(config), "ACP_SERVER_LOG_LEVEL": "error"},
    )
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert lines["base-url"].endswith(f"({config}:1: base-url)") and "http://file/v1" in lines["base-url"]
    assert "***" in lines["api-key"] and KEY not in done.stdout
    assert lines["model"].endswith("(--model)") and "flag-model" in lines["model"]
    assert lines["log-level"].endswith("(ACP_SERVER_LOG_LEVEL)")
    assert lines["max-turn-requests"].endswith("(default)")
    assert done.stdout.splitlines()[0] == f"configuration file: {config}"
