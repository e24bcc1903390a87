"""Imported once, in the server of tests/support/conformance_runs.py (its forkserver preload), never elsewhere: what
each `python -m ama_conformance` run would otherwise do first — import the suite and build its schema validators."""

import ama_conformance.cli
import ama_conformance.core.session_run  # noqa: F401
from ama_conformance.core.transcript import validators

validators()
