"""The store's public surface: exports, the exception tree and its wire details, where the database lives."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import acp_server.store as store_pkg
from acp_server.errors import ServerError
from acp_server.rpc import to_rpc_error
from acp_server.store import (
    InvalidCursorError,
    MemorySessionStore,
    SessionBusyError,
    SqliteSessionStore,
    StoreBusyError,
    StoreClosedError,
    StoredSessionNotFoundError,
    StoreError,
    StoreIOError,
    StoreUnavailableError,
    default_state_dir,
    open_store,
)


def test_exported_members() -> None:
    assert set(store_pkg.__all__) == {
        "DATABASE_NAME",
        "DEFAULT_PAGE_SIZE",
        "SCHEMA_VERSION",
        "InvalidCursorError",
        "MemorySessionStore",
        "Rewind",
        "SessionBusyError",
        "SessionPage",
        "SessionRecord",
        "SessionSnapshot",
        "SessionStore",
        "SqliteSessionStore",
        "StoreBusyError",
        "StoreClosedError",
        "StoreError",
        "StoreIOError",
        "StoreUnavailableError",
        "StoredMessage",
        "StoredSessionNotFoundError",
        "TurnTicket",
        "check_store_url",
        "default_state_dir",
        "open_store",
    }
    for name in store_pkg.__all__:
        value = getattr(store_pkg, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("acp_server.store"), name


@pytest.mark.parametrize(
    ("error", "kind", "code", "details", "retryable"),
    [
        (
            StoreUnavailableError("/s/sessions.db", "corrupt", "not a database"),
            "store_unavailable",
            -32603,
            {"path": "/s/sessions.db", "reason": "corrupt"},
            False,
        ),
        (StoreClosedError(), "store_closed", -32603, {}, False),
        (StoreBusyError("/s/db", 5000), "store_busy", -32603, {"path": "/s/db", "timeoutMs": 5000}, True),
        (StoreIOError("/s/db", "disk full"), "store_io_error", -32603, {"path": "/s/db"}, False),
        (SessionBusyError("s1", 42), "session_busy", -32603, {"sessionId": "s1", "pid": 42}, True),
        (StoredSessionNotFoundError("s1"), "session_not_found", -32002, {"sessionId": "s1"}, False),
        (
            InvalidCursorError(),
            "invalid_params",
            -32602,
            {"errors": [{"field": "cursor", "message": "not a cursor issued by this agent"}]},
            False,
        ),
    ],
)
def test_exception_tree_details_and_wire_mapping(
    error: StoreError, kind: str, code: int, details: dict[str, object], retryable: bool
) -> None:
    assert isinstance(error, StoreError) and isinstance(error, ServerError)
    assert error.error_kind == kind
    assert dict(error.details()) == details
    assert error.retryable is retryable
    wire = to_rpc_error(error)
    assert wire.code == code
    assert wire.data == {"errorKind": kind, **details, "retryable": retryable}


def test_unavailable_message_names_the_file_and_the_way_out() -> None:
    message = str(StoreUnavailableError("/s/sessions.db", "schema_too_new", "its schema version 9 is newer"))
    assert message.startswith("Session store unavailable: /s/sessions.db: its schema version 9 is newer.")
    assert "untouched" in message and "--state-dir" in message and "--no-persist" in message


def test_default_state_dir() -> None:
    assert default_state_dir({"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}) == Path("/x/state/acp-server")
    assert default_state_dir({"HOME": "/home/u"}) == Path("/home/u/.local/state/acp-server")
    # A relative XDG_STATE_HOME is invalid per the XDG spec and ignored.
    assert default_state_dir({"XDG_STATE_HOME": "rel", "HOME": "/home/u"}) == Path("/home/u/.local/state/acp-server")


def test_open_store_touches_nothing_before_it_is_entered(tmp_path: Path) -> None:
    store = open_store(tmp_path / "not-yet")
    assert isinstance(store, SqliteSessionStore)
    assert store.location == str(tmp_path / "not-yet" / "sessions.db")
    assert not (tmp_path / "not-yet").exists()
    assert "unopened" in repr(store)
    memory = open_store(tmp_path / "ignored", persist=False)
    assert isinstance(memory, MemorySessionStore) and memory.location == ":memory:"
    assert memory.persistent is False and store.persistent is True
