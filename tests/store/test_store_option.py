"""``--store URL`` / ``ACP_SERVER_STORE``: which store a face opens, the URL kept secret, and an unreachable
PostgreSQL failing the start with one line (host and database, never the password) and exit 1."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest

from acp_server.config import Settings, add_common_options, settings_from_args, store_password
from acp_server.store import MemorySessionStore, SqliteSessionStore, check_store_url, open_store
from acp_server.store._postgres import PostgresSessionStore

PASSWORD = "pg-s3cret-0123456789"
URL = f"postgresql://acp:{PASSWORD}@db.example:5433/sessions"


def _settings(argv: list[str], env: dict[str, str]) -> Settings:
    parser = argparse.ArgumentParser()
    add_common_options(parser)
    return settings_from_args(parser, parser.parse_args(argv), env)


def test_the_flag_wins_over_the_environment_and_absent_is_sqlite() -> None:
    assert _settings(["--store", URL], {"ACP_SERVER_STORE": "postgresql://other/db"}).store == URL
    assert _settings([], {"ACP_SERVER_STORE": f"  {URL} "}).store == URL
    assert _settings([], {}).store is None
    assert PASSWORD not in repr(_settings(["--store", URL], {}))


@pytest.mark.parametrize("bad", ["sqlite:///x.db", "mysql://u:pg-s3cret-0123456789@h/db", "/var/lib/sessions.db"])
def test_another_scheme_is_a_usage_error_that_never_shows_the_value(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _settings(["--store", bad], {})
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid value for --store: *** (must be a postgresql:// URL" in err
    assert bad not in err and PASSWORD not in err
    with pytest.raises(SystemExit):
        _settings([], {"ACP_SERVER_STORE": bad})
    assert "invalid value for ACP_SERVER_STORE: ***" in capsys.readouterr().err


def test_open_store_picks_the_store_by_url(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path), SqliteSessionStore)
    postgres = open_store(tmp_path, url=URL)
    assert isinstance(postgres, PostgresSessionStore)
    assert PASSWORD not in postgres.location and "db.example" in postgres.location
    assert isinstance(open_store(tmp_path, persist=False, url=URL), MemorySessionStore)  # --no-persist wins
    with pytest.raises(ValueError, match="postgresql://") as refused:
        open_store(tmp_path, url="sqlite:///x")
    assert "sqlite:///x" not in str(refused.value)
    assert check_store_url(" postgres://h/db ") == "postgres://h/db"


def test_store_password_finds_it_in_either_place() -> None:
    assert store_password(URL) == PASSWORD
    assert store_password("postgresql://acp:p%40ss@h/db") == "p@ss"
    assert store_password(f"postgresql:///db?host=/run/pg&password={PASSWORD}") == PASSWORD
    assert store_password("postgresql://h/db") == "" and store_password(None) == ""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    return {**env, **extra}


@pytest.mark.parametrize("face", ["serve", "stdio"])
@pytest.mark.parametrize("given", ["flag", "env"])
def test_an_unreachable_postgresql_fails_the_start_with_one_line_and_exit_1(
    tmp_path: Path, face: str, given: str, acp_server_command: list[str]
) -> None:
    url = f"postgresql://acp:{PASSWORD}@127.0.0.1:9/sessions?connect_timeout=5"  # port 9 (discard): refused
    command = [*acp_server_command, *(["serve", "--port", "0"] if face == "serve" else []), "--offline"]
    env = _clean_env(XDG_STATE_HOME=str(tmp_path))
    if given == "flag":
        command += ["--store", url]
    else:
        env["ACP_SERVER_STORE"] = url
    done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and PASSWORD not in done.stderr + done.stdout
    # The one line of the command (the store's log line says the same, from the log's writer thread: either first).
    lines = [line for line in done.stderr.splitlines() if line.startswith("acp-server: ")]
    assert len(lines) == 1 and "cannot connect" in lines[0], done.stderr
    assert lines[0].startswith("acp-server: session store ")
    assert "host=127.0.0.1" in lines[0] and "dbname=sessions" in lines[0] and "password" not in lines[0]
    assert done.stdout == ""
    assert not (tmp_path / "acp-server" / "sessions.db").exists()  # the SQLite default was not opened instead


def test_ask_hands_the_url_to_its_agent_in_the_environment_never_on_its_command_line() -> None:
    from acp_server.cli._main import _child_args, _parser

    args = _parser().parse_args(["ask", "--store", URL, "--persist", "--offline", "hi"])
    forwarded = _child_args(args)
    assert "--store" not in forwarded and URL not in forwarded and "--offline" in forwarded
