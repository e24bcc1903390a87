"""The one cheap request that tells whether a key works: list the models.

OpenAI-compatible servers: `GET {base}/models` with `Authorization: Bearer KEY`; Anthropic: `GET {base}/v1/models`
with `x-api-key` and `anthropic-version` (a base ending in /v1 gets only `/models`, as the provider does).
Nothing is billed. The answer is a `Verdict` with one line for a person; the server is as hostile as any input:
its body is read up to a cap, its error text shortened, stripped of control characters and of the key itself
(a server that echoes the key back must not make ama print it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ama_acp.errors import causes
from ama_acp.providers.model_list import context_length, model_list_items, models_request
from ama_acp.providers.tls import CERTIFICATE_ADVICE, certificate_failure, tls_for
from ama_acp.setup.choices import ProviderOption, SetupError, check_model_name

if TYPE_CHECKING:
    import httpx

TIMEOUT = 10.0
MAX_BODY = 4 * 1024 * 1024  # a model list is kilobytes; a body past this is not one
MAX_MODELS = 1000
MAX_MESSAGE = 200


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str  # one line for a person
    refused: bool = False  # 401/403: the key, not the server, is the problem
    models: tuple[str, ...] = ()  # the ids the server listed (names as it spells them)
    windows: Mapping[str, int] = field(default_factory=dict)  # name → context length, where the list states one


def models_url(option: ProviderOption) -> str:
    return models_request(option.kind, option.base_url, None)[0]


def request_headers(option: ProviderOption, key: str | None) -> dict[str, str]:
    return {"accept": "application/json", **models_request(option.kind, option.base_url, key)[1]}


def verify(
    option: ProviderOption, key: str | None, *, timeout: float = TIMEOUT, transport: httpx.BaseTransport | None = None
) -> Verdict:
    """Ask `option`'s server for its models with `key`. Never raises for anything the server or the network
    does; a KeyboardInterrupt still goes through (Ctrl-C while waiting)."""
    import httpx

    url = models_url(option)
    host = urlsplit(url).netloc or url
    try:
        # No redirect is followed, so the TLS context is the URL's own (providers/tls.py: none loaded for http).
        with httpx.Client(timeout=timeout, follow_redirects=False, transport=transport, verify=tls_for(url)) as client:
            with client.stream("GET", url, headers=request_headers(option, key)) as response:
                body = _read_capped(response)
                status = response.status_code
    except httpx.TimeoutException:
        return Verdict(False, f"cannot reach {host}: no answer within {timeout:g} s")
    except (httpx.HTTPError, OSError, ValueError) as exc:
        if (why := certificate_failure(exc)) is not None:
            failed = f"its TLS certificate failed verification ({_clean(why, key)})"
            return Verdict(False, f"cannot trust {host}: {failed}. {CERTIFICATE_ADVICE}")
        return Verdict(False, f"cannot reach {host}: {_clean(_reason(exc), key)}")
    return _judged(option, key, host, status, body)


def _judged(option: ProviderOption, key: str | None, host: str, status: int, body: bytes) -> Verdict:
    """What the server's answer says of the key and the URL."""
    if status in (401, 403):
        where = f"create a new one at {option.key_page}" if option.key_page else f"ask for the key {host} expects"
        return Verdict(False, f"the key was refused (HTTP {status}): check it, or {where}", refused=True)
    if not 200 <= status < 300:
        detail = _clean(_error_text(body), key)
        return Verdict(False, f"{host} answered HTTP {status}" + (f": {detail}" if detail else ""))
    models = parse_models(body)
    windows = parse_windows(body)
    listed = f"{len(models)} model{'s' if len(models) != 1 else ''} listed" if models else "no model list"
    what = "the key works" if key else "the server answers"
    return Verdict(True, f"{what} ({host}, {listed})", models=models, windows=windows)


def _read_capped(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            break  # a truncated body parses as nothing, which is what an endless one deserves
    return b"".join(chunks)


def _reason(exc: BaseException) -> str:
    """The innermost useful words: httpx wraps the socket's error, whose strerror is the part a person reads."""
    for cause in causes(exc):
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
    return str(exc) or type(exc).__name__


def parse_models(body: bytes) -> tuple[str, ...]:
    """The ids of an OpenAI- or Anthropic-style list (`{"data": [{"id": …}, …]}`), each one checked; anything else
    is no list at all."""
    return tuple(dict.fromkeys(name for name, _ in _entries(body)))


def parse_windows(body: bytes) -> dict[str, int]:
    """The context length each listed model states (vLLM, OpenRouter, LM Studio, llama.cpp: see
    model_list.context_length), by checked id; a model that states none, or a broken one, is not in it. When an
    id is listed twice, its first entry's figure counts, as its first entry is the one shown."""
    windows: dict[str, int] = {}
    for name, window in _entries(body):
        if window is not None:
            windows.setdefault(name, window)
    return windows


def _entries(body: bytes) -> list[tuple[str, int | None]]:
    items = model_list_items(body)
    if items is None:
        return []
    found: list[tuple[str, int | None]] = []
    for item in items[:MAX_MODELS]:
        raw = item.get("id") if isinstance(item, dict) else None
        if not isinstance(raw, str):
            continue
        try:
            found.append((check_model_name(raw), context_length(item)))
        except SetupError:
            continue  # a hostile or broken id is left out, not shown
    return found


def _error_text(body: bytes) -> str:
    """The server's own words: `error.message` (OpenAI, Anthropic), `error` or `message` or `detail` as a
    string (vLLM, llama.cpp, Ollama, proxies), else the body's text."""
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        return body[:4096].decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for field in ("error", "message", "detail"):
            if isinstance(data.get(field), str):
                return str(data[field])
    return body[:4096].decode("utf-8", "replace")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]+")


def _clean(text: str, key: str | None) -> str:
    """One short line that cannot move the terminal's cursor nor show the key."""
    if key:
        text = text.replace(key, "[the key]")
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1].rstrip() + "…"
