"""A pytest plugin for the test of the temp-dir check itself (tests/unit/test_temp_leftovers.py): every test run
with it loaded (`-p tests.support.temp_plant`) leaves a folder in the temp dir, as a leaking test would."""

from __future__ import annotations

import tempfile

import pytest


def pytest_runtest_call(item: pytest.Item) -> None:
    tempfile.mkdtemp(prefix="planted-")
