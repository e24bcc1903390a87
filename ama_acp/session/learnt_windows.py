"""The windows (and prices) the connection's servers state for models the config and the catalog leave unknown.

The first time a session needs the window of such a model (its meter, at open or after a model switch), the
model's server is asked in the background (providers/window_probe.py), once per provider and model for the
connection; until it answers the window is unknown and the meter silent (D3), and nothing waits for it: not
`initialize`, not `session/new`, not a prompt. Its answer goes to every live session of that model (`on_learnt`),
and the session's next `usage_update` carries it (docs/context.md "Windows stated by the server").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ama_acp.config import Config, Price

if TYPE_CHECKING:
    from ama_acp.session.runtime import Spawn

log = logging.getLogger(__name__)


class LearntWindows:
    def __init__(self, config: Config, on_learnt: Callable[[str], None]) -> None:
        self._config = config
        self._on_learnt = on_learnt
        self._asked: dict[str, tuple[int | None, Price | None]] = {}  # model id → its answer ((None, None): asking)

    def window(self, model_id: str, spawn: Spawn | None) -> int | None:
        """The window the model's server stated; None while it is asked, or when it stated none (asked now the
        first time, when there is a task group to ask in: not under `ama -p`)."""
        if model_id not in self._asked and spawn is not None:
            self._ask(model_id, spawn)
        return self._asked.get(model_id, (None, None))[0]

    def price(self, model_id: str) -> Price | None:
        return self._asked.get(model_id, (None, None))[1]

    def _ask(self, model_id: str, spawn: Spawn) -> None:
        from ama_acp.credentials import key_source
        from ama_acp.providers.window_probe import target

        self._asked[model_id] = (None, None)  # asked once: a failure is not asked again (ama doctor says why)
        where = target(self._config, model_id, key_source())
        if where is None:
            return

        async def ask() -> None:
            from ama_acp.providers.window_probe import learn_window

            try:
                learnt = await learn_window(where)
            except Exception:  # a bug here must not end the connection: the meter stays silent, as before
                log.exception("asking the window of %s failed", model_id)
                return
            if learnt.window is None:
                log.info("the window of %s is unknown: %s", model_id, learnt.why)
                return
            log.info("the window of %s: %d, from %s", model_id, learnt.window, learnt.source)
            self._asked[model_id] = (learnt.window, learnt.price)
            self._on_learnt(model_id)

        spawn(ask)
