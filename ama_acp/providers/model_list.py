"""The cheapest request a provider answers: its model list. `ama setup` uses it to check a key (and reads the
context length an entry states, `context_length`), `ama doctor` to check that a provider answers; both send it
as the provider's own requests are sent.

OpenAI-compatible servers: `GET {base}/models` with `Authorization: Bearer KEY`; Anthropic: `GET {base}/v1/models`
(a base already ending in /v1 gets only `/models`) with `x-api-key` and `anthropic-version`.
"""

from __future__ import annotations

import json


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
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
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
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONTEXT_LENGTH:
            return value
    return None
