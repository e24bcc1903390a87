"""The fixture agent (fixture_agent.py) with one of two behaviours of real agents that once cost a suite run its
verdict or its time, for the tests of the runner (tests/integration/test_conformance_runner.py):

    python -S tests/support/acp_fixtures/launch.py stateful_agent --saves-settings
    python -S tests/support/acp_fixtures/launch.py stateful_agent --model-hangs

`--saves-settings`: like mistral-vibe, it saves a mode or config option a client switches to its home
(`$HOME/.fixture-agent/settings.json`), and a process that starts and finds that file answers every `session/new`
with "missing API key". A suite that hands each group a fresh home sees a conforming agent; one that shares the
home finds every group after the first switch unable to open a session.

`--model-hangs`: its model never answers: a prompt turn sends nothing and ends only when it is cancelled
(`cancelled`, as ACP asks). Everything else is the conforming fixture agent. Stdlib only.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ama_conformance.core.directives import Directive

if __package__:
    from .fixture_agent import INTERNAL_ERROR, Agent, RpcError, Session, Turn, log
else:
    from fixture_agent import INTERNAL_ERROR, Agent, RpcError, Session, Turn, log

SETTINGS = os.path.join(".fixture-agent", "settings.json")  # under $HOME
USAGE = "usage: stateful_agent.py --saves-settings | --model-hangs"


class SavesSettings(Agent):
    """Saves what a client switches; refuses sessions once it started with saved settings."""

    def __init__(self, stdout: Any) -> None:
        super().__init__(frozenset(), stdout)
        self.path = os.path.join(os.environ.get("HOME", "."), SETTINGS)
        self.found = os.path.exists(self.path)  # read once, at start, as a config file is

    def keep(self, key: str, value: object) -> None:
        settings: dict[str, object] = {}
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                settings = json.load(f)
        settings[key] = value
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(settings, f)

    def session_new(self, rid: Any, params: dict[str, Any]) -> None:
        if self.found:
            raise RpcError(INTERNAL_ERROR, f"missing API key for the model saved in {self.path}")
        super().session_new(rid, params)

    def set_mode(self, rid: Any, params: dict[str, Any]) -> None:
        super().set_mode(rid, params)
        self.keep("mode", params.get("modeId"))

    def set_config_option(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        result = super().set_config_option(rid, params)
        self.keep(str(params.get("configId")), params.get("value"))
        return result


class ModelHangs(Agent):
    """A turn waits for a model that never answers: nothing is sent until a cancel ends it."""

    def act(self, session: Session, turn: Turn, directive: Directive | None) -> None:
        turn.cancelled.wait()


def main() -> None:
    kinds = {"--saves-settings": SavesSettings, "--model-hangs": ModelHangs}
    if len(sys.argv) != 2 or sys.argv[1] not in kinds:
        sys.exit(USAGE)
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() cannot reach the wire
    kind = kinds[sys.argv[1]]
    agent = SavesSettings(stdout) if kind is SavesSettings else ModelHangs(frozenset(), stdout)
    agent.serve(sys.stdin.buffer)
    agent.shutdown()
    log("stateful agent done")
    sys.stderr.flush()
    os._exit(0)  # as the fixture agent: daemon threads must not race the interpreter's teardown


if __name__ == "__main__":
    main()
