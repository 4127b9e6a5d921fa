"""Each setting's default is its component's: the default a flag's help (and so the manual's table) states is the one
the component is handed when nothing is asked for; what is asked for reaches the component unchanged; the settings
write no default of their own; and reading the command line never imports the model stack or the daemon."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from acp_server.config import OPTIONS, SERVE_OPTIONS, Option, ServeSettings, Settings

SETTINGS = Settings()
SERVE = ServeSettings()


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


EFFECTIVE: dict[str, Callable[[], object]] = {
    "model": lambda: SETTINGS.model_settings().model,
    "compact_threshold": lambda: SETTINGS.model_settings().compact_threshold,
    "max_turn_requests": lambda: SETTINGS.model_settings().max_turn_requests,
    "stream_idle_timeout_ms": lambda: SETTINGS.stream_policy().idle_timeout_ms,
    "stream_max_lifetime_ms": lambda: SETTINGS.stream_policy().max_lifetime_ms,
    "max_pending_prompts_per_session": lambda: SETTINGS.bridge_arguments()["max_pending_prompts_per_session"],
    "default_mode": lambda: SETTINGS.bridge_arguments()["default_mode"],
    "mcp_connect_timeout_ms": lambda: _ms(SETTINGS.bridge_arguments()["mcp"].connect_timeout_s),
    "mcp_call_timeout_ms": lambda: _ms(SETTINGS.bridge_arguments()["mcp"].call_timeout_s),
    "fs_request_timeout_ms": lambda: SETTINGS.agent_options().fs_request_timeout_ms,
    "task_max_requests": lambda: SETTINGS.model_settings().subagents.max_requests,
    "task_timeout_ms": lambda: _ms(SETTINGS.model_settings().subagents.timeout_s),
    "task_concurrency": lambda: SETTINGS.model_settings().subagents.concurrency,
    "max_message_bytes": SETTINGS.line_limit,
    "log_level": lambda: SETTINGS.log_level,
    "host": lambda: SETTINGS.daemon_options(SERVE).host,
    "port": lambda: SETTINGS.daemon_options(SERVE).port,
    "max_body_bytes": lambda: SETTINGS.daemon_options(SERVE).max_body_bytes,
    "event_ring_size": lambda: SETTINGS.daemon_options(SERVE).event_ring_size,
    "event_ring_total_bytes": lambda: SETTINGS.daemon_options(SERVE).event_ring_total_bytes,
    "max_connections": lambda: SETTINGS.daemon_options(SERVE).max_connections,
    "header_timeout_ms": lambda: _ms(SETTINGS.daemon_options(SERVE).header_timeout_s),
    "body_timeout_ms": lambda: _ms(SETTINGS.daemon_options(SERVE).body_timeout_s),
}
"""How to read, from the component it is handed to, the default each setting gets when nothing is asked for."""

NOT_A_VALUE = {
    "models",
    "context_window",
    "prompt_deadline_ms",
    "state_dir",
    "store",
    "allow_origins",
    "sandbox_network",
    "sandbox_mechanism",
    "web_fetch_allow",
}
"""Settings whose help states a default that is no component's constant (none, the endpoint's list, SQLite...)."""


@pytest.mark.parametrize("option", [*OPTIONS, *SERVE_OPTIONS], ids=lambda option: option.flag)
def test_the_default_a_help_states_is_the_one_its_component_gets(option: Option) -> None:
    if "(default" not in option.help:
        assert option.dest not in EFFECTIVE
        return
    assert option.dest in EFFECTIVE or option.dest in NOT_A_VALUE, f"{option.flag}: where does its default come from?"
    if option.dest in EFFECTIVE:
        value = EFFECTIVE[option.dest]()
        assert re.search(rf"\((default:? |default: .*, else ){re.escape(str(value))}\b", option.help), (
            f"{option.flag}: its component's default is {value!r}; the help says {option.help!r}"
        )


def test_the_daemon_advertises_the_idle_timeout_the_pipeline_applies() -> None:
    assert SETTINGS.daemon_options(SERVE).stream_idle_timeout_ms == SETTINGS.stream_policy().idle_timeout_ms
    asked = Settings(stream_idle_timeout_ms=-1)
    assert asked.daemon_options(SERVE).stream_idle_timeout_ms == asked.stream_policy().idle_timeout_ms == -1


def test_what_is_asked_for_reaches_the_component_unchanged() -> None:
    settings = Settings(
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        models=("a", "b"),
        context_window=1000,
        compact_threshold=0,  # falsy, and still asked for
        max_answer_tokens=0,
        stream_idle_timeout_ms=0,
        stream_max_lifetime_ms=7,
        max_message_bytes=9,
        max_turn_requests=3,
        max_pending_prompts_per_session=None,
        prompt_deadline_ms=5,
        default_mode="read-only",
        allow_bypass_permissions=True,
        mcp_connect_timeout_ms=1500,
        mcp_call_timeout_ms=2500,
        fs_request_timeout_ms=11,
        no_project_instructions=True,
        system_prompt="Be brief.",
    )
    model = settings.model_settings()
    assert (model.base_url, model.api_key, model.model, model.models) == ("http://127.0.0.1:9/v1", "k", "a", ("a", "b"))
    assert (model.context_window, model.compact_threshold, model.max_turn_requests) == (1000, 0, 3)
    assert model.max_answer_tokens == 0
    assert (model.system_prompt, model.project_instructions) == ("Be brief.", False)
    assert (model.policy.idle_timeout_ms, model.policy.max_lifetime_ms) == (0, 7)
    bridge = settings.bridge_arguments()
    assert (bridge["max_pending_prompts_per_session"], bridge["prompt_deadline_ms"]) == (None, 5)
    assert bridge["default_mode"] == "read-only"
    assert "bypass-permissions" in bridge["modes"]
    assert settings.bridge_arguments(modes=("read-only",))["modes"] == ("read-only",)
    assert (bridge["mcp"].connect_timeout_s, bridge["mcp"].call_timeout_s) == (1.5, 2.5)
    assert settings.agent_options().fs_request_timeout_ms == 11
    assert settings.line_limit() == 9
    serve = ServeSettings(
        host="::1",
        port=0,
        token=" t ",
        max_body_bytes=1,
        allow_origins=("http://a.example",),
        event_ring_size=2,
        event_ring_total_bytes=3,
        max_connections=4,
        header_timeout_ms=250,
        body_timeout_ms=750,
    )
    daemon = settings.daemon_options(serve)
    assert (daemon.host, daemon.port, daemon.token, daemon.allow_origins) == ("::1", 0, "t", ("http://a.example",))
    assert (daemon.max_body_bytes, daemon.event_ring_size, daemon.event_ring_total_bytes) == (1, 2, 3)
    assert (daemon.max_connections, daemon.header_timeout_s, daemon.body_timeout_s) == (4, 0.25, 0.75)
    assert (daemon.stream_idle_timeout_ms, daemon.fs_request_timeout_ms) == (0, 11)
    assert Settings(model="m", models=("a",)).model_settings().model == "m"


def test_a_combination_the_daemon_refuses_is_refused_through_its_part() -> None:
    with pytest.raises(ValueError, match="without a token"):
        SETTINGS.daemon_options(ServeSettings(host="0.0.0.0"))


SETTINGS_SOURCE = Path(__file__).resolve().parents[2] / "acp_server" / "config" / "_settings.py"


def _literal_defaults(source: str) -> list[str]:
    """The fields of the settings' dataclasses whose default is a number or a text written out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name in ("Settings", "ServeSettings"):
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    value = statement.value
                    if isinstance(value, ast.Call):  # field(default=...)
                        value = next((k.value for k in value.keywords if k.arg == "default"), None)
                    number_or_text = isinstance(value, ast.Constant) and not isinstance(value.value, bool | None)
                    if number_or_text or isinstance(value, ast.BinOp):
                        found.append(statement.target.id)
    return found


def test_the_settings_write_no_default_of_their_own() -> None:
    """A default is its component's constant (or None: not asked for), never a number or a text written again."""
    assert _literal_defaults(SETTINGS_SOURCE.read_text()) == []
    seen = "class Settings:\n    a: int = 5\n    b: int = 64 * 1024\n    c: str = 'x'\n    d: bool = False\n"
    assert _literal_defaults(seen + "    e: int | None = None\n    f: str = field(default='y')\n") == [
        "a",
        "b",
        "c",
        "f",
    ]


def test_reading_the_command_line_imports_neither_the_model_stack_nor_the_daemon() -> None:
    """The ``ask`` parent, ``--help`` and a usage error pay for the settings only: the component defaults config
    does not import at start are resolved when a face that runs the component asks for its part."""
    code = (
        "import sys, acp_server.cli._main; "
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('acp_server.')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    layers = set(ast.literal_eval(out))
    assert layers.isdisjoint({"pipeline", "provider", "tools", "turn", "bridge", "acp", "rpc", "daemon"}), layers
