"""The cheapest request a provider answers: its model list. `ama setup` uses it to check a key (and reads the
context length an entry states, `context_length`), `ama doctor` to check that a provider answers; both send it
as the provider's own requests are sent.

OpenAI-compatible servers: `GET {base}/models` with `Authorization: Bearer KEY`; Anthropic: `GET {base}/v1/models`
(a base already ending in /v1 gets only `/models`) with `x-api-key` and `anthropic-version`.
"""

from __future__ import annotations

import json
import re

from ama_acp.config import Price


def models_request(kind: str, base_url: str, key: str | None) -> tuple[str, dict[str, str]]:
    """(URL, headers) of the model-list request for a provider of `kind` at `base_url` (no trailing slash
    needed), with `key` when there is one."""
    base = base_url.rstrip("/")
    if kind == "anthropic":
        # Imported here: the Anthropic provider module (and what it pulls in) is not worth loading up front.
        from ama_acp.providers.anthropic import API_VERSION

        headers = {"anthropic-version": API_VERSION, **({"x-api-key": key} if key else {})}
        return base + ("/models" if base.endswith("/v1") else "/v1/models"), headers
    return base + "/models", ({"authorization": f"Bearer {key}"} if key else {})


def model_list_items(body: bytes) -> list[object] | None:
    """The `data` array of an OpenAI- or Anthropic-style model list (`{"data": [{"id": …}, …]}`), its items not
    yet looked at; None when the body is not such a list (not JSON, nested past what Python can parse, another
    shape)."""
    obj = _json(body)
    data = obj.get("data") if isinstance(obj, dict) else None
    return data if isinstance(data, list) else None


# A context length no server should claim: past it the figure is a broken or hostile value, not a window. The
# longest windows served today are ~10M tokens (Llama 4 Scout); 2**27 leaves room and still rejects nonsense.
MAX_CONTEXT_LENGTH = 2**27

# Where each server puts a model's context length in its model-list entry, the first that holds a usable value
# winning. Only fields confirmed in the servers' own answers are read:
#   vLLM           `max_model_len` (its ModelCard; the window the server was started with)
#   OpenRouter     `context_length`
#   LM Studio      `loaded_context_length` (the loaded instance's), then `max_context_length` (the model's);
#                  in its REST API's list (`/api/v0/models`), not in its OpenAI-compatible one
#   llama.cpp      `meta.n_ctx_train` (the window the model was trained with; the server may run a smaller one)
# The window actually served comes before the model's maximum, so the meter errs towards "full" not "empty".
_CONTEXT_FIELDS: tuple[tuple[str, ...], ...] = (
    ("max_model_len",),
    ("loaded_context_length",),
    ("context_length",),
    ("max_context_length",),
    ("meta", "n_ctx_train"),
)


def context_length(item: object) -> int | None:
    """The context window a model-list entry states, in tokens; None when it states none usable. The entry comes
    from a server, so it is hostile input: only a positive int (not a bool, float or string) up to
    MAX_CONTEXT_LENGTH counts."""
    if not isinstance(item, dict):
        return None
    for path in _CONTEXT_FIELDS:
        value: object = item
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        if (window := sane_window(value)) is not None:
            return window
    return None


# --- what a running server states of the window it serves (providers/window_probe.py) ------------------------
#
# The agent asks the server it talks to, and only reads what that server says it runs with, never a model's
# maximum or its training window: llama.cpp's `meta.n_ctx_train` and LM Studio's `max_context_length` (read
# above for `ama setup`, where a person confirms the figure) are not the window a request gets.


MAX_ITEMS = 10_000  # entries of a list looked through for one model: OpenRouter lists a few hundred


def sane_window(value: object) -> int | None:
    """`value` when it is a window a server may state: a positive int (not a bool, a float, a string) up to
    MAX_CONTEXT_LENGTH; else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONTEXT_LENGTH:
        return value
    return None


def _json(body: bytes) -> object:
    """The body as JSON; None when it is not JSON or nests past what Python can parse."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _entry(items: object, model: str | set[str], *names: str) -> dict[str, object] | None:
    """The first item of the list `items` one of whose fields `names` is `model` (or one of a set of names)."""
    if not isinstance(items, list):
        return None
    wanted = {model} if isinstance(model, str) else model
    for item in items[:MAX_ITEMS]:
        if isinstance(item, dict) and any(isinstance(v := item.get(name), str) and v in wanted for name in names):
            return item
    return None


def listed_window(body: bytes, model: str) -> int | None:
    """The window `model`'s entry in an OpenAI-style model list states as served: vLLM's `max_model_len`, LM
    Studio's `loaded_context_length` (a base URL of its own REST API, `…/api/v0`, lists it), OpenRouter's
    `context_length`."""
    entry = _entry(model_list_items(body), model, "id")
    if entry is None:
        return None
    fields = ("max_model_len", "loaded_context_length", "context_length")
    return next((w for w in (sane_window(entry.get(f)) for f in fields) if w is not None), None)


# A price per token no model charges ($1,000 a million): past it the figure is broken, not a price.
_MAX_TOKEN_PRICE = 1e-3


def _per_million(value: object) -> float | None:
    """OpenRouter's per-token price (a decimal string, e.g. "0.000003") as USD per million tokens."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        n = float(value)
    except ValueError:
        return None
    return round(n * 1_000_000, 9) if 0 <= n <= _MAX_TOKEN_PRICE else None  # inf and nan fail the comparison


def listed_price(body: bytes, model: str) -> Price | None:
    """The price `model`'s entry in OpenRouter's model list states (`pricing.prompt`, `.completion`, and the cache
    rates `.input_cache_read`, `.input_cache_write` where given), in USD per million tokens; None unless both
    the prompt and the completion price are usable."""
    entry = _entry(model_list_items(body), model, "id")
    pricing = entry.get("pricing") if entry is not None else None
    if not isinstance(pricing, dict):
        return None
    given, made = pricing.get("prompt"), pricing.get("completion")
    prompt, completion = _per_million(given), _per_million(made)
    if prompt is None or completion is None:
        return None
    read, write = pricing.get("input_cache_read"), pricing.get("input_cache_write")
    return Price(prompt, completion, _per_million(read), _per_million(write))


def props_window(body: bytes) -> int | None:
    """llama.cpp's server, `GET /props`: `default_generation_settings.n_ctx`, the context of one of its slots —
    what one request gets (`-c` divided among `--parallel` slots), not the model's `n_ctx_train`."""
    obj = _json(body)
    settings = obj.get("default_generation_settings") if isinstance(obj, dict) else None
    return sane_window(settings.get("n_ctx")) if isinstance(settings, dict) else None


def lmstudio_window(body: bytes, model: str) -> int | None:
    """LM Studio's REST API, `GET /api/v0/models`: `loaded_context_length` of `model`'s entry, which LM Studio
    states only while the model is loaded (its `max_context_length` is the model's maximum, not the window)."""
    obj = _json(body)
    entry = _entry(obj.get("data") if isinstance(obj, dict) else None, model, "id")
    return sane_window(entry.get("loaded_context_length")) if entry is not None else None


_NUM_CTX = re.compile(r"^num_ctx[ \t]+([0-9]{1,10})[ \t]*$", re.MULTILINE)


def ollama_show_window(body: bytes) -> int | None:
    """Ollama, `POST /api/show {"model": …}`: the `num_ctx` its `parameters` text sets (`num_ctx 8192`, one
    parameter a line) — what a request through the OpenAI-compatible API gets, as that API cannot ask for
    another. `model_info`'s `<family>.context_length` is the model's maximum, not what Ollama allocates."""
    obj = _json(body)
    text = obj.get("parameters") if isinstance(obj, dict) else None
    if not isinstance(text, str):
        return None
    found = _NUM_CTX.search(text[:65536])
    return sane_window(int(found.group(1))) if found else None


def ollama_ps_window(body: bytes, model: str) -> int | None:
    """Ollama, `GET /api/ps`: `context_length` of `model` among the loaded models — the context Ollama allocated
    when it loaded it (its default, `OLLAMA_CONTEXT_LENGTH`, when the model's parameters set no `num_ctx`)."""
    obj = _json(body)
    names = {model} if ":" in model else {model, model + ":latest"}  # Ollama lists `qwen3` as `qwen3:latest`
    entry = _entry(obj.get("models") if isinstance(obj, dict) else None, names, "model", "name")
    return sane_window(entry.get("context_length")) if entry is not None else None
