"""The cheapest request a provider answers: its model list. `ama setup` uses it to check a key, `ama doctor` to
check that a provider answers; both send it as the provider's own requests are sent.

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
