"""The start-up warm-up of the schema models is best effort: a failure is logged, never raised."""

from __future__ import annotations

import errno
import importlib
import logging
from types import ModuleType

import pytest

from acp_server.acp import _schema


def test_a_preload_that_cannot_open_files_is_logged_and_does_not_raise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = importlib.import_module

    def out_of_descriptors(name: str, package: str | None = None) -> ModuleType:
        if name == "acp.schema":
            raise OSError(errno.EMFILE, "Too many open files")
        return real(name, package)

    monkeypatch.setattr(_schema.importlib, "import_module", out_of_descriptors)
    with caplog.at_level(logging.WARNING, logger="acp_server.acp"):
        _schema.preload()  # the daemon runs this in a thread at start: raising there would end the process
    assert "could not preload" in caplog.text and "Too many open files" in caplog.text
