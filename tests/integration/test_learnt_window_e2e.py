"""Windows stated by the running server (issue 41 point 1), over real pipes: `ama --mode acp` subprocesses
against the local model server speaking each vendor's own endpoints as documented (no network).

A model without a configured window gets its meter once its server has said what window it serves: the
`usage_update`s carry `size` = that window from the first one after the answer (none before, as D3 wants), one
per change (D1). A configured window wins and nothing is asked; a nonsense answer leaves the meter silent and
`ama doctor` says why; the question never holds up `initialize`, `session/new` or a prompt.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess
from tests.support.harness import Ama, clean_env, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
WINDOW = 8192


@pytest.fixture
def llm():
    with LLMServer() as server:
        yield server


# What each vendor states, at its own endpoint, for the model `m` (as its documentation shows the answer).
VENDORS: dict[str, tuple[str, str, object]] = {
    "vllm": (
        "/v1",
        "GET /v1/models",
        {"object": "list", "data": [{"id": "m", "owned_by": "vllm", "max_model_len": WINDOW}]},
    ),
    "llama.cpp": (
        "/v1",
        "GET /props",
        {"default_generation_settings": {"n_ctx": WINDOW, "params": {}}, "total_slots": 1, "model_path": "m.gguf"},
    ),
    "lm-studio": (
        "/v1",
        "GET /api/v0/models",
        {
            "object": "list",
            "data": [{"id": "m", "state": "loaded", "max_context_length": 131072, "loaded_context_length": WINDOW}],
        },
    ),
    "ollama-show": (
        "/v1",
        "POST /api/show",
        {
            "parameters": f'num_ctx                        {WINDOW}\nstop                           "<|im_end|>"',
            "model_info": {"qwen2.context_length": 32768},
        },
    ),
    "ollama-ps": (
        "/v1",
        "GET /api/ps",
        {"models": [{"name": "m:latest", "model": "m:latest", "context_length": WINDOW}]},
    ),
    "openrouter": (
        "/api/v1",
        "GET /api/v1/models",
        {"data": [{"id": "m", "context_length": WINDOW, "pricing": {"prompt": "0.000001", "completion": "0.000002"}}]},
    ),
}


def configure(ama: Ama, llm: LLMServer, path: str = "/v1", window: str = "", models: tuple[str, ...] = ("m",)) -> None:
    entries = "".join(f'[[models]]\nid = "local/{m}"\n{window}\n' for m in models)
    ama.config.write_text(
        f'model = "local/{models[0]}"\n[providers.local]\nkind = "openai"\nbase_url = "{llm.url}{path}"\n'
        f'api_key_env = "LOCAL_TEST_KEY"\nmax_retries = 0\n{entries}'
    )


async def open_session(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    return session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))


async def prompt_until_sized(conn: AgentProcess, llm: LLMServer, sid: str, size: int, turns: int = 20) -> int:
    """Prompts until a usage_update carries `size` (the window is learnt in the background: the first answer
    may come before it); how many prompts that took."""
    for n in range(1, turns + 1):
        if any(u.get("size") == size for u in usage_updates(conn, sid)):
            return n - 1
        llm.enqueue({"text": "ok", "usage": {"input": 10, "output": 5}})
        await conn.prompt(sid, f"turn {n}", timeout=15)
    raise AssertionError(f"no usage_update with size {size}: {usage_updates(conn, sid)}")


def asked(llm: LLMServer, endpoint: str) -> int:
    """How many times the agent asked the server `endpoint` ("GET /props")."""
    return [key for key, _ in llm.probes].count(endpoint)


def no_repeats(updates: list[dict[str, Any]]) -> None:
    """D1: one update per change — never the same payload twice in a row."""
    for a, b in zip(updates, updates[1:], strict=False):
        assert a != b, f"the same usage_update twice: {a}"


@pytest.mark.parametrize("vendor", list(VENDORS))
async def test_each_vendors_stated_window_reaches_the_meter(tmp_path, llm, vendor):
    path, endpoint, answer = VENDORS[vendor]
    llm.stated[endpoint] = answer
    ama = Ama(tmp_path)
    configure(ama, llm, path)
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        await conn.wait_for(lambda: asked(llm, endpoint) > 0)  # the server was asked
        await prompt_until_sized(conn, llm, sid, WINDOW)
        updates = usage_updates(conn, sid)
        # Until the window was known, no update at all (D3: no invented size); from then on, all of them.
        assert updates and all(u["size"] == WINDOW for u in updates)
        assert all(u["_meta"]["ama"]["percent"] == round(u["used"] * 100 / WINDOW, 1) for u in updates)
        no_repeats(updates)
        assert asked(llm, endpoint) == 1, llm.probes  # once per provider and model
        if endpoint == "POST /api/show":
            assert [json.loads(body) for key, body in llm.probes if key == endpoint] == [{"model": "m"}]
        if vendor == "openrouter":  # and the price it states: $1 and $2 per million, 10 in and 5 out a request
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert updates[-1]["cost"]["amount"] == pytest.approx(stats["billed"]["requests"] * 20 / 1e6)


async def test_a_configured_window_wins_and_nothing_is_asked(tmp_path, llm):
    llm.stated["GET /props"] = VENDORS["llama.cpp"][2]
    ama = Ama(tmp_path)
    configure(ama, llm, window="context_window = 50000")
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        await prompt_until_sized(conn, llm, sid, 50_000)
        llm.enqueue({"text": "ok", "usage": {"input": 10, "output": 5}})
        await conn.prompt(sid, "again", timeout=15)
        assert {u["size"] for u in usage_updates(conn, sid)} == {50_000}
    assert llm.probes == []


NONSENSE: list[object] = [0, -8192, 2**40, 8192.0, "8192", True, None, [8192], {"n_ctx": 8192}]


@pytest.mark.parametrize("n_ctx", NONSENSE, ids=repr)
async def test_a_nonsense_window_leaves_the_meter_silent(tmp_path, llm, n_ctx):
    llm.stated["GET /props"] = {"default_generation_settings": {"n_ctx": n_ctx}}
    ama = Ama(tmp_path)
    configure(ama, llm)
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        await conn.wait_for(lambda: len(llm.probes) == 4)  # every endpoint asked, nothing usable: done
        for n in range(2):
            llm.enqueue({"text": "ok", "usage": {"input": 10, "output": 5}})
            await conn.prompt(sid, f"turn {n}", timeout=15)
        assert usage_updates(conn, sid) == []  # no size invented


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"default_generation_settings": ' * 5000, b"[" * 100_000, b"{}"],
    ids=["text", "deep", "nested", "empty"],
)
async def test_a_broken_answer_leaves_the_meter_silent(tmp_path, llm, body):
    llm.stated["GET /props"] = body
    ama = Ama(tmp_path)
    configure(ama, llm)
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        await conn.wait_for(lambda: len(llm.probes) == 4)
        llm.enqueue({"text": "ok", "usage": {"input": 10, "output": 5}})
        await conn.prompt(sid, "hello", timeout=15)
        assert usage_updates(conn, sid) == []


def doctor(ama: Ama) -> str:
    env = clean_env(ama.tmp, {**ENV, "AMA_CONFIG": str(ama.config)})
    out = subprocess.run(
        [sys.executable, "-m", "ama_acp", "doctor"], capture_output=True, text=True, timeout=60, env=env, cwd=ama.tmp
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout


def test_doctor_says_where_the_window_comes_from_or_why_it_is_unknown(tmp_path, llm):
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.models = [{"id": "m", "object": "model"}]  # the provider answers the doctor's check, stating no window
    llm.stated["GET /props"] = {"default_generation_settings": {"n_ctx": 0}}
    out = doctor(ama)
    assert "window: unknown: /v1/models: no usable window for m; /props: no usable window for m; " in out, out
    llm.stated["GET /props"] = VENDORS["llama.cpp"][2]
    assert "window: learnt from /props: 8192" in doctor(ama)
    configure(ama, llm, window="context_window = 50000")
    assert "window: 50000 (configured)" in doctor(ama)


async def test_the_question_holds_up_neither_the_open_nor_the_first_answer(tmp_path, llm):
    """The server holds every answer about its window: initialize, session/new and a whole prompt turn answer
    all the same (the question is never awaited on their path); the window comes once the server answers."""
    llm.stated["GET /props"] = VENDORS["llama.cpp"][2]
    llm.gate.clear()
    ama = Ama(tmp_path)
    configure(ama, llm)
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        llm.enqueue({"text": "first answer", "usage": {"input": 10, "output": 5}})
        result = await conn.prompt(sid, "hello", timeout=15)
        assert result["stopReason"] == "end_turn"
        assert usage_updates(conn, sid) == []  # asked, not answered: the meter is silent
        llm.gate.set()
        await conn.wait_for(lambda: asked(llm, "GET /props") == 1)
        await prompt_until_sized(conn, llm, sid, WINDOW)


async def test_a_model_switch_takes_the_new_models_stated_window(tmp_path, llm):
    data = [{"id": "m", "loaded_context_length": WINDOW}, {"id": "n", "loaded_context_length": 4096}]
    llm.stated["GET /api/v0/models"] = {"object": "list", "data": data}
    ama = Ama(tmp_path)
    configure(ama, llm, models=("m", "n"))
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        await conn.wait_for(lambda: asked(llm, "GET /api/v0/models") == 1)
        await prompt_until_sized(conn, llm, sid, WINDOW)
        before = len(usage_updates(conn, sid))
        await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/n"})
        await conn.wait_for(lambda: asked(llm, "GET /api/v0/models") == 2)
        await prompt_until_sized(conn, llm, sid, 4096)
        after = usage_updates(conn, sid)[before:]
        assert after and all(u["size"] == 4096 for u in after)  # nothing sent under the new model until known
        no_repeats(usage_updates(conn, sid))
        assert asked(llm, "GET /api/v0/models") == 2  # once per model


async def test_an_idle_session_shows_the_learnt_window_at_once_without_a_prompt(tmp_path, llm):
    """The meter appears as soon as the server has said its window: the editor of a session opened and left idle
    gets its usage_update then, not with a first prompt."""
    path, endpoint, answer = VENDORS["llama.cpp"]
    llm.stated[endpoint] = answer
    ama = Ama(tmp_path)
    configure(ama, llm, path)
    async with run_ama(ama, env=ENV, process=True) as conn:
        sid = await open_session(conn, ama)
        await conn.wait_for(lambda: any(u.get("size") == WINDOW for u in usage_updates(conn, sid)), timeout=15)
        updates = usage_updates(conn, sid)
        assert llm.requests == []  # no prompt was sent, no model request made
        assert [u["size"] for u in updates] == [WINDOW]  # none before it was known (D3), one after (D1)
