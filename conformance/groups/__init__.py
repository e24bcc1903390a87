"""The test groups. Importing this package registers every one of them in `base.GROUPS`, in run order."""

from conformance.groups import lifecycle, options, persistence, tools, turns, usage

__all__ = ["lifecycle", "options", "persistence", "tools", "turns", "usage"]
