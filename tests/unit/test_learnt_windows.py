"""session/learnt_windows.py: a window a server stated is kept for the connection; a server that stated none (not
up yet, a model loaded on its first request) is asked again when the window is next needed, RETRY_AFTER_S after
its answer at the soonest — against the local model server, with the clock moved by the test."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from ama_acp.config import Config, ModelEntry, ProviderConfig
from ama_acp.session.learnt_windows import RETRY_AFTER_S, LearntWindows
from tests.support.llm_server import LLMServer

PROPS = "GET /props"


def _config(url: str) -> Config:
    return Config(
        providers={"local": ProviderConfig(kind="openai", base_url=f"{url}/v1")}, models=[ModelEntry(id="local/m")]
    )


def test_a_failed_question_is_asked_again_after_the_back_off_and_a_found_window_is_kept() -> None:
    now = [1000.0]
    learnt: list[str] = []
    with LLMServer() as llm:
        windows = LearntWindows(_config(llm.url), learnt.append, clock=lambda: now[0])

        async def main() -> list[int | None]:
            seen: list[int | None] = []
            async with anyio.create_task_group() as tg:

                def spawn(fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
                    tg.start_soon(fn)

                async def settle(done: Callable[[], bool]) -> None:
                    """Until the question has its answer (10 s at most): its requests run on this event loop."""
                    with anyio.fail_after(10):
                        for _ in range(1000):
                            if done():
                                return
                            await anyio.sleep(0.01)

                seen.append(windows.window("local/m", spawn))  # asked: nothing stated yet
                await settle(lambda: "local/m" in windows._failed)  # every endpoint said no
                now[0] += RETRY_AFTER_S - 1
                seen.append(windows.window("local/m", spawn))  # too soon to ask again
                llm.stated[PROPS] = {"default_generation_settings": {"n_ctx": 4096}}
                now[0] += 1
                seen.append(windows.window("local/m", spawn))  # due: asked again, answers this time
                await settle(lambda: learnt == ["local/m"])
                seen.append(windows.window("local/m", spawn))
                now[0] += 10 * RETRY_AFTER_S
                seen.append(windows.window("local/m", spawn))  # found: kept, never asked again
            return seen

        seen = anyio.run(main)
        asked = [k for k, _ in llm.probes].count(PROPS)
    assert seen == [None, None, None, 4096, 4096]
    assert asked == 2
    assert learnt == ["local/m"]
