"""`python conformance/run.py [options] -- AGENT CMD…`: the suite run by path from a checkout. Same program as
`python -m ama_conformance` and `ama conformance`; kept so the path that older notes name still works."""

from __future__ import annotations

import sys
from pathlib import Path


def _load() -> None:
    """Make this checkout's conformance/ importable as `ama_conformance` (its installed name), when it is not
    installed: the folder is registered under that name, so its absolute imports resolve to these files."""
    import importlib.util

    if importlib.util.find_spec("ama_conformance") is not None:
        return
    folder = Path(__file__).resolve().parent
    sys.path.insert(0, str(folder.parent))  # ama_acp, beside it
    spec = importlib.util.spec_from_file_location(
        "ama_conformance", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ama_conformance"] = module
    spec.loader.exec_module(module)


_load()
from ama_conformance.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
