"""The windows (and prices) the connection's servers state for models the config and the catalog leave unknown.

The first time a session needs the window of such a model (its meter, at open or after a model switch), the
model's server is asked in the background (providers/window_probe.py), once per provider and model for the
connection; until it answers the window is unknown and the meter silent (D3), and nothing waits for it: not
`initialize`, not `session/new`, not a prompt. Its answer goes to every live session of that model (`on_learnt`):
an idle one tells its editor at once, a busy one with its next `usage_update` (docs/context.md "Windows stated by
the server").

A server that stated nothing usable (not up yet, a model LM Studio loads on its first request, a timeout) is asked
again when the window is next needed, RETRY_AFTER_S after its last answer at the soonest: a window found once is
kept for the connection, a failure is not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ama_acp.config import Config, Price

if TYPE_CHECKING:
    from ama_acp.session.runtime import Spawn

log = logging.getLogger(__name__)

RETRY_AFTER_S = 60.0  # a server that stated no window is asked again no sooner than this


class LearntWindows:
    def __init__(
        self, config: Config, on_learnt: Callable[[str], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._config = config
        self._on_learnt = on_learnt
        self._clock = clock
        self._asked: dict[str, tuple[int | None, Price | None]] = {}  # model id → its answer ((None, None): asking)
        self._failed: dict[str, float] = {}  # model id → when its server last stated no usable window
        self._told: set[str] = set()  # models whose failure the log has said (at INFO once, then at DEBUG)

    def window(self, model_id: str, spawn: Spawn | None) -> int | None:
        """The window the model's server stated; None while it is asked, or when it stated none (asked now the
        first time, and again RETRY_AFTER_S after a failure, when there is a task group to ask in: not under
        `ama -p`)."""
        failed = self._failed.get(model_id)
        due = model_id not in self._asked or (failed is not None and self._clock() - failed >= RETRY_AFTER_S)
        if due and spawn is not None:
            self._ask(model_id, spawn)
        return self._asked.get(model_id, (None, None))[0]

    def price(self, model_id: str) -> Price | None:
        return self._asked.get(model_id, (None, None))[1]

    def _ask(self, model_id: str, spawn: Spawn) -> None:
        from ama_acp.credentials import key_source
        from ama_acp.providers.window_probe import target

        self._asked[model_id] = (None, None)
        self._failed.pop(model_id, None)  # asking: not due again until this question has its answer
        where = target(self._config, model_id, key_source())
        if where is None:
            return  # no server to ask (a provider ama does not probe): never due again

        async def ask() -> None:
            from ama_acp.providers.window_probe import learn_window

            try:
                learnt = await learn_window(where)
            except Exception:  # a bug here must not end the connection: the meter stays silent, as before
                log.exception("asking the window of %s failed", model_id)
                return
            if learnt.window is None:
                level = logging.DEBUG if model_id in self._told else logging.INFO
                self._told.add(model_id)
                log.log(level, "the window of %s is unknown: %s (asked again when next needed)", model_id, learnt.why)
                self._failed[model_id] = self._clock()
                return
            log.info("the window of %s: %d, from %s", model_id, learnt.window, learnt.source)
            self._asked[model_id] = (learnt.window, learnt.price)
            self._on_learnt(model_id)

        spawn(ask)
