"""The scripted model: deterministic replies from a script file. A product feature — it powers `ama demo`,
the tests and the conformance suite, and lets the real server run offline.

A script (TOML or JSON) is a list of `reply` tables, consumed one per model request in order: the next
reply, or reply n where n counts the assistant messages already in the conversation if that is further on,
so a loaded or resumed session carries on where it stopped. Fields of a reply:

    text = "..."                  # streamed as text deltas
    thinking = "..."              # streamed as reasoning before the text
    tool_calls = [{id = "call_1", name = "read_file", arguments = {path = "calc.py"}}]
    usage = {input = 2508, output = 40, cache_read = 0, cache_write = 0}   # or "auto" (default) / "cached" / "none"
    stop = "end_turn"             # default: tool_use when there are tool calls
    chunk = 12                    # characters per delta
    delay = 0.0                   # seconds between deltas
    hang = 0.0                    # seconds to wait before finishing (cancel tests)
    failure = {kind = "server", message = "..."}   # fail the request instead

`usage = "auto"` reports what a real provider would: input = the heuristic estimate of the request
(system prompt, tool declarations and messages), output = the estimate of the reply. `usage = "cached"` reports
the same total the way a provider with automatic prefix caching bills it (OpenAI's rules: nothing below 1,024
prompt tokens, then 128-token steps): the part this provider's previous request shares with this one — in an
agent loop the previous request is a prefix of the next — is `cache_read`, the rest `input`. It lets the offline
demo show the prompt-cache figures a real provider gives. When the script runs out, the model says so in a
short reply instead of failing.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Literal

import anyio
import msgspec

from ama_acp.conversation.messages import AssistantMessage, Usage
from ama_acp.errors import ConfigError
from ama_acp.providers import base as pb

CACHE_MINIMUM = 1024  # usage="cached": the smallest prompt an automatic prefix cache keeps (OpenAI's figure)
CACHE_STEP = 128  # ... and the steps it caches in


class ScriptError(ConfigError):
    """The script file cannot be used (missing, unreadable, malformed); resolve.py makes it a "config" failure."""


class ToolCallSpec(msgspec.Struct, frozen=True):
    name: str
    arguments: object = msgspec.field(default_factory=dict)  # an object (sent as JSON) or a string sent as is
    id: str | None = None


class FailureSpec(msgspec.Struct, frozen=True):
    kind: pb.FailureKind = "server"  # checked when the script is read: a kind ama does not know is a ScriptError
    message: str = "The scripted model failed as scripted."


class Reply(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCallSpec] = []
    usage: Usage | Literal["auto", "cached", "none"] = "auto"  # another word is a ScriptError at load
    stop: pb.StopKind | None = None
    chunk: int = 12
    delay: float = 0.0
    hang: float = 0.0
    failure: FailureSpec | None = None


class Script(msgspec.Struct, frozen=True):
    reply: list[Reply] = []


def load_script(path: str | Path) -> Script:
    p = Path(path)
    try:
        raw_text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"cannot read script {p}: {exc.strerror}") from None
    try:
        raw = json.loads(raw_text) if p.suffix == ".json" else tomllib.loads(raw_text)
        return msgspec.convert(raw, Script)
    except (ValueError, msgspec.ValidationError) as exc:
        raise ScriptError(f"script {p}: {exc}") from None


def bundled_script(name: str) -> Path | None:
    ref = resources.files("ama_acp") / "scripts" / f"{name}.toml"
    return Path(str(ref)) if ref.is_file() else None


def resolve_script(name: str, configured: Mapping[str, str], env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if name in configured:
        return Path(configured[name]).expanduser()
    if env.get("AMA_SCRIPT"):
        return Path(env["AMA_SCRIPT"]).expanduser()
    bundled = bundled_script(name)
    if bundled is None:
        raise ScriptError(f"no script for scripted/{name}: set AMA_SCRIPT or `scripts.{name}` in the config")
    return bundled


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: Script, estimate_request: Callable[[pb.ModelRequest], int] | None = None) -> None:
        self._script = script
        self._estimate = estimate_request  # the input-token estimate behind usage="auto"
        self._next = 0  # side requests and compaction shrink the conversation; the script still moves on
        self._previous_input: int | None = None  # the last request's estimate, for usage="cached"

    async def stream(self, request: pb.ModelRequest) -> AsyncGenerator[pb.ProviderEvent, None]:
        reply = self._reply(request)
        if reply.failure is not None:
            yield pb.Failure(reply.failure.kind, reply.failure.message)
            return
        yield pb.Accepted()  # as a real provider's 2xx stream: billed from here on, even if cut short
        for delta in _deltas(reply):
            if reply.delay:
                await anyio.sleep(reply.delay)
            yield delta
        calls = _tool_calls(reply)
        for event in calls:
            yield event
        if reply.hang:
            await anyio.sleep(reply.hang)
        out_chars = len(reply.thinking) + len(reply.text) + sum(len(c.name) + len(c.arguments) for c in calls)
        stop: pb.StopKind = reply.stop or ("tool_use" if calls else "end_turn")
        yield pb.Finished(stop, self._usage(reply, request, out_chars))

    def _reply(self, request: pb.ModelRequest) -> Reply:
        """The script's next reply: the one after the last given, or after the conversation's last answer."""
        index = max(self._next, sum(1 for m in request.messages if isinstance(m, AssistantMessage)))
        self._next = index + 1
        if index >= len(self._script.reply):
            return Reply(text="(The scripted model has no more replies in its script.)")
        return self._script.reply[index]

    def _usage(self, reply: Reply, request: pb.ModelRequest, out_chars: int) -> Usage | None:
        if isinstance(reply.usage, Usage):
            return reply.usage
        if reply.usage == "none" or self._estimate is None:
            return None
        total = self._estimate(request)
        output = max(1, -(-out_chars // 4))
        previous, self._previous_input = self._previous_input, total
        if reply.usage != "cached":
            return Usage(input=total, output=output)
        shared = min(previous or 0, total)
        read = shared // CACHE_STEP * CACHE_STEP if shared >= CACHE_MINIMUM else 0
        return Usage(input=total - read, output=output, cache_read=read, cache_write=0)


def _deltas(reply: Reply) -> Iterator[pb.ThinkingDelta | pb.TextDelta]:
    """The reply's thinking, then its text, in pieces of `chunk` characters."""
    step = max(1, reply.chunk)
    for i in range(0, len(reply.thinking), step):
        yield pb.ThinkingDelta(reply.thinking[i : i + step])
    for i in range(0, len(reply.text), step):
        yield pb.TextDelta(reply.text[i : i + step])


def _tool_calls(reply: Reply) -> list[pb.ToolCallEvent]:
    calls = []
    for i, call in enumerate(reply.tool_calls):
        args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        calls.append(pb.ToolCallEvent(call.id or f"call_{i + 1}", call.name, args))
    return calls
