"""Shared pytest fixtures for ama's tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Make `tests.support...` importable however pytest is invoked (`pytest`, `python -m pytest`, from any cwd).
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)


@pytest.fixture(scope="session")
def acp_validator():
    """A WireValidator over the pinned official ACP schema (fails the test, saying how to get the schema)."""
    from tests.support.acp_schema import SchemaUnavailable, load_validator

    try:
        return load_validator()
    except SchemaUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def anyio_backend():
    """ama runs on asyncio; anyio's pytest plugin runs `@pytest.mark.anyio` tests on it."""
    return "asyncio"
