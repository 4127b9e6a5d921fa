"""The start-up warm-up of the schema models is best effort: a failure is logged, never raised."""

from __future__ import annotations

import errno
import importlib
import logging
import subprocess
import sys
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


def test_after_the_warm_up_a_full_collection_no_longer_walks_the_imported_objects() -> None:
    """The imports' objects live as long as the process; frozen, a full collection skips them (it walked ~10^5
    objects, 100-170 ms of stalled event loop under load). In a fresh process: the freeze is process-wide."""
    code = (
        "import gc; from acp_server.acp import _schema; before = gc.get_freeze_count(); _schema.preload(); "
        "print(before, gc.get_freeze_count(), len(gc.get_objects(generation=2)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, frozen, left = map(int, out.split())
    assert before == 0 and frozen > 50_000
    assert left < frozen / 10  # what a full collection still walks
