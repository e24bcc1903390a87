"""`python -m ama_conformance [options] -- AGENT CMD…`: the suite run from a checkout (same as `ama conformance`)."""

from ama_conformance.cli import main

raise SystemExit(main())
