"""`python conformance/run.py [options] -- AGENT CMD…`: the suite run by path from a checkout. Same program as
`python -m conformance` and `ama conformance`; kept so the path that older notes name still works."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
