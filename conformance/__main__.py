"""`python -m conformance [options] -- AGENT CMD…`: the suite run from a checkout (same as `ama conformance`)."""

from conformance.cli import main

raise SystemExit(main())
