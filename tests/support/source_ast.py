"""`ast.parse` for the tests that read ama's own source, safe from a CPython 3.11 fault.

Python 3.11's AST constructor checks that its recursion counter ends where it began; when the garbage collector
runs a finalizer in the middle of a parse (an asyncio transport an earlier test left behind, failing with "Event
loop is closed"), the thread's counter moves under it and the parse fails with `SystemError: AST constructor
recursion depth mismatch` — for a file that is fine. So the collector is paused for the parse (nothing of ours
needs it there), and a parse that fails that way anyway is done once more.
"""

from __future__ import annotations

import ast
import gc


def parse_source(text: str, filename: str = "<unknown>") -> ast.Module:
    enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return ast.parse(text, filename=filename)
        except SystemError:  # the fault above, not the file: a second parse starts from a settled counter
            return ast.parse(text, filename=filename)
    finally:
        if enabled:
            gc.enable()
