"""The window a running OpenAI-compatible server serves a model with, asked of that server (issue 41 point 1).

A model that neither the config (`context_window`) nor the catalog knows has no meter (D3). Local servers state
the window they run with, each its own way; the agent asks, in the background, once per provider and model
(session/learnt_windows.py), and `ama doctor` asks the same way. The requests, in this order, the first usable
answer winning (model_list.py reads each):

  1. `GET {base}/models`: vLLM's `max_model_len`, OpenRouter's `context_length` (and its price);
  2. `GET {root}/props`: llama.cpp's `default_generation_settings.n_ctx`;
  3. `GET {root}/api/v0/models`: LM Studio's `loaded_context_length`;
  4. `POST {root}/api/show`: Ollama's `num_ctx` in the model's parameters, then
  5. `GET {root}/api/ps`: Ollama's `context_length` of the loaded model.

`root` is the base URL without its `/v1` (where these servers keep their own endpoints). Steps 2–5 go only to
a server that is not one of the built-in cloud providers' (nor OpenRouter's): those have none of them. Nothing
goes beyond the base URL's host, no redirect is followed, each request has a short timeout and all of them
together a bound, each body is read up to a cap, and every answer is hostile: only an int in a sane range
(model_list.sane_window) is a window. Anything else leaves the window unknown, with the reason.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from ama_acp.config import Config, Price
from ama_acp.errors import ProviderError
from ama_acp.providers import model_list as ml
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS

if TYPE_CHECKING:
    import httpx

REQUEST_TIMEOUT = 2.0  # seconds for one request: a server on the same machine or network answers in ms
TOTAL_TIMEOUT = 6.0  # seconds for all of them: the meter waits no longer than this to know its window
MAX_BODY = 4 * 1024 * 1024  # OpenRouter's model list is about 1 MiB; past this an answer is not one
# Hosts that serve none of the local servers' own endpoints: asked only their model list.
_CLOUD_HOSTS = frozenset({urlsplit(e.base_url).hostname or "" for e in BUILTIN_ENDPOINTS.values()} | {"openrouter.ai"})


class Target(NamedTuple):
    base_url: str  # the provider's base URL, without a trailing slash
    model: str  # the model's name as the server knows it (the id without its provider)
    key: str | None  # sent as the provider sends it (`Authorization: Bearer`), to the same host only


@dataclass(frozen=True)
class Learnt:
    """What the server stated: a window and where (`source`: the path asked), or why none is known."""

    window: int | None
    source: str = ""
    why: str = ""
    price: Price | None = None  # USD per million tokens, where the server states it (OpenRouter)

    def text(self) -> str:
        """`ama doctor`'s words: "learnt from /props: 8192" or "unknown: …"."""
        if self.window is None:
            return f"unknown: {self.why}"
        return f"learnt from {self.source}: {self.window}"


class ProbeFailed(ProviderError):
    """One request got no usable answer: why, in a few words (`learn` makes it a reason, never raises it)."""


# (method, URL, JSON body or None) → (status, body); raises ProbeFailed.
Fetch = Callable[[str, str, bytes | None], Awaitable[tuple[int, bytes]]]


def target(cfg: Config, model_id: str, keys: Mapping[str, str]) -> Target | None:
    """Where `model_id`'s server is and the key it takes, when it is an OpenAI-compatible one whose key (if it
    needs one) is set; None otherwise (Anthropic, the scripted model, an unknown provider, a missing key)."""
    from ama_acp.providers.resolve import ModelError, api_key_env, base_url_for, provider_config, split_model_id

    try:
        provider, name = split_model_id(model_id)
    except ModelError:
        return None
    pcfg = provider_config(cfg, provider)
    if pcfg is None or pcfg.kind != "openai":
        return None
    variable = api_key_env(provider, pcfg)
    key = keys.get(variable) if variable else None
    if variable and not key:
        return None
    return Target(base_url_for(provider, pcfg, keys), name, key)


def _root(base_url: str) -> str:
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


def _steps(t: Target) -> list[tuple[str, str, str, bytes | None, Callable[[bytes], int | None]]]:
    """(shown path, method, URL, JSON body, reader) of each request, in order."""
    root = _root(t.base_url)
    model = t.model
    steps: list[tuple[str, str, str, bytes | None, Callable[[bytes], int | None]]] = [
        (
            urlsplit(t.base_url + "/models").path,
            "GET",
            t.base_url + "/models",
            None,
            lambda b: ml.listed_window(b, model),
        )
    ]
    if (urlsplit(t.base_url).hostname or "") in _CLOUD_HOSTS:
        return steps
    show = json.dumps({"model": model}).encode()
    return steps + [
        ("/props", "GET", root + "/props", None, ml.props_window),
        ("/api/v0/models", "GET", root + "/api/v0/models", None, lambda b: ml.lmstudio_window(b, model)),
        ("/api/show", "POST", root + "/api/show", show, ml.ollama_show_window),
        ("/api/ps", "GET", root + "/api/ps", None, lambda b: ml.ollama_ps_window(b, model)),
    ]


async def learn(fetch: Fetch, t: Target) -> Learnt:
    """Each request in turn until one states a usable window; never raises for what a server does."""
    import anyio

    reasons: list[str] = []
    with anyio.move_on_after(TOTAL_TIMEOUT):
        for n, (shown, method, url, payload, read) in enumerate(_steps(t)):
            try:
                status, body = await fetch(method, url, payload)
            except ProbeFailed as exc:
                reasons.append(f"{shown}: {exc}")
                continue
            if not 200 <= status < 300:
                reasons.append(f"{shown}: HTTP {status}")
                continue
            window = read(body)
            if window is not None:
                return Learnt(window, shown, price=ml.listed_price(body, t.model) if n == 0 else None)
            reasons.append(f"{shown}: no usable window for {t.model}")
        return Learnt(None, why="; ".join(reasons) or "nothing to ask")
    reasons.append(f"no answer within {TOTAL_TIMEOUT:g} s")
    return Learnt(None, why="; ".join(reasons))


async def learn_window(t: Target, transport: httpx.AsyncBaseTransport | None = None) -> Learnt:
    """`learn` over HTTP: the server's requests sent as a model request is (providers/exchange.py: straight over
    httpcore, which the first prompt needs anyway — a probe running beside a first answer imports no httpx), no
    redirects, TLS as the provider's."""
    from ama_acp.providers.exchange import send, transport_error
    from ama_acp.providers.failures import StreamError

    headers = {"accept": "application/json", **({"authorization": f"Bearer {t.key}"} if t.key else {})}

    async def fetch(method: str, url: str, payload: bytes | None) -> tuple[int, bytes]:
        sent = {**headers, "content-type": "application/json"} if payload is not None else headers
        limits = {"timeout": REQUEST_TIMEOUT, "connect_timeout": REQUEST_TIMEOUT}
        try:
            async with send(method, url, sent, payload, **limits, transport=transport) as reply:
                return reply.status, await _capped(reply.chunks)
        except ProbeFailed:
            raise
        except StreamError as exc:  # a body in an encoding not asked for, a corrupt one, a header not ASCII
            raise ProbeFailed(exc.detail) from None
        except Exception as exc:
            kind = transport_error(exc)
            if kind in ("timeout", "connect_timeout"):
                raise ProbeFailed(f"no answer within {REQUEST_TIMEOUT:g} s") from None
            if kind is None and not isinstance(exc, OSError | ValueError):
                raise  # a bug of ours: learn_window's caller logs it
            raise ProbeFailed(f"cannot reach it ({type(exc).__name__})") from None

    return await learn(fetch, t)


async def _capped(chunks: AsyncIterator[bytes]) -> bytes:
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > MAX_BODY:
            raise ProbeFailed(f"an answer over {MAX_BODY // (1024 * 1024)} MiB")
    return bytes(body)


def describe_window(cfg: Config, model_id: str, keys: Mapping[str, str], ask: bool = True) -> str:
    """`ama doctor`'s `window:` line: the model's window as the meter gets it — the config's, the catalog's,
    else what its server states, asked as the agent asks it (synchronously: the doctor runs no event loop) when
    `ask` (not with --no-network, nor of a server that did not answer the doctor's check)."""
    from ama_acp.providers.catalog import Catalog

    info = Catalog(cfg.models).get(model_id)
    if info is not None and info.context_window is not None:
        configured = any(m.id == model_id and m.context_window is not None for m in cfg.models)
        return f"{info.context_window} ({'configured' if configured else 'the catalog'})"
    where = target(cfg, model_id, keys)
    if where is None:
        return "unknown: neither the config nor the catalog states it, and its server is not asked (set context_window)"
    if not ask:
        return "unknown: its server not asked (see its provider's line)"
    import anyio

    return anyio.run(learn_window, where).text()
