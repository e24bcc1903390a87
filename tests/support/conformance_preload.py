"""Imported once, in the server of tests/support/conformance_runs.py (its forkserver preload), never elsewhere: what
each `python -m conformance` run would otherwise do first — import the suite and build its schema validators."""

import conformance.cli  # noqa: F401
import conformance.session_run  # noqa: F401
from conformance.runner import validators

validators()
