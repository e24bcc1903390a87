"""Start one of this directory's stdlib agents from its compiled module:

    python -S tests/support/acp_fixtures/launch.py fixture_agent [ARGS...]
    python -S tests/support/acp_fixtures/launch.py coverage_agent [ARGS...]
    python -S tests/support/acp_fixtures/launch.py subagent_agent [ARGS...]
    python -S tests/support/acp_fixtures/launch.py stateful_agent --saves-settings|--model-hangs

Python keeps the compiled bytecode of a module it imports (`__pycache__`), never of the script it runs: started as
a script, the 1,400-line fixture agent was compiled anew at each of the ~330 starts of one test run (~30 ms of CPU
each, a third of its start). Imported from here it loads from `__pycache__`, which the test process writes when it
imports the package. `-S` skips `site` (the venv's editable-install finder, ~10 ms): the agents need only the
standard library and the checkout they live in. `__import__`, not importlib (whose package import is ~2 ms more).
Run any of the files as a script and it works the same, only slower.
"""

import sys

AGENTS = ("fixture_agent", "coverage_agent", "subagent_agent", "stateful_agent")

name = sys.argv.pop(1) if len(sys.argv) > 1 else ""
if name not in AGENTS:
    sys.exit(f"launch.py: name the agent first, one of: {', '.join(AGENTS)}")
__import__(name).main()
