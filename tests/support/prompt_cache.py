"""A prompt cache for the test model server (tests/support/llm_server.py) that bills like the real APIs.

    server.prompt_cache = PromptCache(ttl=300.0, min_tokens=1024, clock=clock)
    server.enqueue({"text": "ok", "usage": "cache"})   # the server computes input / cache_read / cache_write

`output` is the reply's size by the same count (its text and tool calls), or `cache_usage = {"output": N}`.

Tokens are counted as ama's heuristic does for ASCII (¼ token a character, rounded up) over a canonical
serialization of the request, block by block, so two requests that share their first blocks share a prefix:

- OpenAI Chat Completions (automatic caching, like OpenAI's): every request's prompt is stored; a later
  request reads the longest prefix it shares with an entry still alive, if that is at least `min_tokens`,
  rounded down to `min_tokens` + a multiple of `step` (128) tokens. No writes are reported (OpenAI bills none).
- Anthropic Messages (breakpoints): a prefix is cached only up to a block marked `cache_control`, written
  (`cache_creation_input_tokens`) when at least `min_tokens` long; a later request reads the longest stored
  prefix that ends at one of its own block boundaries within `lookback` (20) blocks before one of its
  breakpoints, and writes the rest up to its last breakpoint. `cache_control` itself is not part of a block's
  text, so moving the marker does not change the prefix.

An entry lives `ttl` seconds after it was last written or read (reads refresh it, as Anthropic's do), by
`clock` (default `time.monotonic`): a test moves its own clock instead of waiting.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any


def _tokens(chars: int) -> int:
    return -(-chars // 4)


def _canon(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=True)


def openai_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(text, marked) per block in prompt order: tools, then messages."""
    out = [(_canon(t), False) for t in body.get("tools") or []]
    out += [(_canon(m), False) for m in body.get("messages") or []]
    return out


def anthropic_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(text, marked) per block in Anthropic's cache order: tools, system, then each message's content blocks."""
    out: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        out.append((_canon(tool), isinstance(tool, dict) and "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        out.append((_canon({"system": system}), False))
    elif isinstance(system, list):
        out += [(_canon(b), isinstance(b, dict) and "cache_control" in b) for b in system]
    for message in body.get("messages") or []:
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            out.append((_canon({"role": role, "text": content}), False))
            continue
        for i, block in enumerate(content or []):
            marked = isinstance(block, dict) and "cache_control" in block
            out.append((_canon({"role": role, "first": i == 0, "block": block}), marked))
    return out


class PromptCache:
    def __init__(
        self,
        ttl: float = 300.0,
        min_tokens: int = 1024,
        *,
        step: int = 128,
        lookback: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl, self.min_tokens, self.step, self.lookback, self.clock = ttl, min_tokens, step, lookback, clock
        self._entries: dict[str, float] = {}  # prefix text -> last written or read
        self._lock = threading.Lock()
        self.log: list[dict[str, int]] = []  # the usage computed for each request, in order

    def _alive(self, prefix: str, now: float) -> bool:
        seen = self._entries.get(prefix)
        return seen is not None and now - seen <= self.ttl

    def usage(self, dialect: str, body: Any, reply: dict[str, Any]) -> dict[str, int]:
        body = body if isinstance(body, dict) else {}
        output = (reply.get("cache_usage") or {}).get("output")
        if output is None:  # the reply's own size, as ama's heuristic counts it (its text and its tool calls)
            calls = "".join(json.dumps(c.get("arguments")) + str(c.get("name")) for c in reply.get("tool_calls") or [])
            output = max(1, _tokens(len(str(reply.get("text") or "")) + len(calls)))
        output = int(output)
        with self._lock:
            now = self.clock()
            if dialect == "openai":
                u = self._openai(openai_blocks(body), now)
            else:
                u = self._anthropic(anthropic_blocks(body), now)
            u["output"] = output
            self.log.append(dict(u))
            return u

    def _openai(self, blocks: list[tuple[str, bool]], now: float) -> dict[str, int]:
        text = "".join(b for b, _ in blocks)
        best = 0
        for prefix in [p for p in self._entries if self._alive(p, now)]:
            n = 0
            limit = min(len(prefix), len(text))
            while n < limit and prefix[n] == text[n]:
                n += 1
            if n > best:
                best, hit = n, prefix
        cached = best // 4
        cached = (
            0 if cached < self.min_tokens else self.min_tokens + (cached - self.min_tokens) // self.step * self.step
        )
        if cached:
            self._entries[hit] = now
        self._entries[text] = now
        prompt = _tokens(len(text))
        return {"input": prompt - cached, "cache_read": cached, "cache_write": 0}

    def _anthropic(self, blocks: list[tuple[str, bool]], now: float) -> dict[str, int]:
        ends: list[int] = []
        size = 0
        for text, _ in blocks:
            size += len(text)
            ends.append(size)
        whole = "".join(b for b, _ in blocks)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        read_end = 0
        for m in marks:
            for i in range(m, max(-1, m - self.lookback), -1):
                if ends[i] > read_end and self._alive(whole[: ends[i]], now):
                    read_end = ends[i]
        if read_end:
            self._entries[whole[:read_end]] = now
        write_end = ends[marks[-1]] if marks else 0
        written = 0
        if write_end > read_end and write_end // 4 >= self.min_tokens:
            for m in marks:
                if ends[m] // 4 >= self.min_tokens:
                    self._entries[whole[: ends[m]]] = now
            written = write_end // 4 - read_end // 4
        read = read_end // 4
        prompt = _tokens(len(whole))
        return {"input": max(prompt - read - written, 0), "cache_read": read, "cache_write": written}
