"""The settings of issue 44: ``--web-fetch-allow`` (flag, environment, a file's list; ``private``; a bad network is
a usage error), ``--read-only-network``, the subagents' bounds, and the user's directory for commands and skills
(``$XDG_CONFIG_HOME/acp-server``) reaching the bridge's parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.cli._main import _parser
from acp_server.config import Settings, SettingsError, resolve_settings


def _settings(argv: list[str], env: dict[str, str]) -> Settings:
    return resolve_settings(_parser().parse_args(argv), env)


def test_web_fetch_networks_from_flag_environment_and_file(tmp_path: Path) -> None:
    assert _settings(["--web-fetch-allow", "10.1.2.3/8, 127.0.0.1"], {}).web_fetch_allow == (
        "10.0.0.0/8",
        "127.0.0.1/32",
    )
    assert _settings([], {"ACP_SERVER_WEB_FETCH_ALLOW": "private"}).web_fetch_allow == ("0.0.0.0/0", "::/0")
    config = tmp_path / "c.toml"
    config.write_text('web-fetch-allow = ["fd00::/8", "192.168.1.0/24"]\nread-only-network = true\n')
    config.chmod(0o600)
    settings = _settings([], {"ACP_SERVER_CONFIG": str(config)})
    assert settings.web_fetch_allow == ("fd00::/8", "192.168.1.0/24") and settings.read_only_network
    with pytest.raises(SettingsError, match=r"--web-fetch-allow.*not an IP network"):
        _settings(["--web-fetch-allow", "intranet"], {})


def test_the_parts_reach_the_bridge_and_the_turn(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ACP_SERVER_TASK_TIMEOUT_MS": "5000"}
    settings = _settings(["--task-max-requests", "3", "--task-concurrency", "2", "--read-only-network"], env)
    assert settings.user_config_dir == str(tmp_path / "acp-server")
    subagents = settings.model_settings().subagents
    assert (subagents.max_requests, subagents.timeout_s, subagents.concurrency) == (3, 5.0, 2)
    parts = settings.bridge_arguments()
    assert "web_fetch" in parts["tools"].offered("read-only")
    (tmp_path / "acp-server/commands").mkdir(parents=True)
    (tmp_path / "acp-server/commands/hi.md").write_text("Say hi")
    assert [c.name for c in parts["commands"].commands(str(tmp_path / "project"))] == ["hi"]
