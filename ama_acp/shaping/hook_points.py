"""The five points of a session where the person's hooks run (docs/commands.md "Hooks"), and what each outcome
means there. Protocol-free: the session and the tool runner turn the values returned here into what the model
reads and the person sees; a warning for the person goes through the session's `warn`.

Exit 0 goes on (for `prompt_submit` and `session_start` the hook's stdout is context the model reads); exit 2
blocks a `pre_tool` call (the model reads the hook's stderr as the call's result) or a `prompt_submit` prompt
(the person reads why), and adds the stderr to the result for `post_tool`; any other end is a warning to the
person, and things go on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import msgspec

from ama_acp.config import Config
from ama_acp.shaping.hook_process import Ran, run_hook
from ama_acp.shaping.hooks import Hook, config_hooks, report
from ama_acp.tools.base import ToolResult

MAX_CONTEXT_CHARS = 32_000  # what the hooks of one point may add to the conversation
MAX_NOTE_CHARS = 8_000  # a post_tool hook's stderr added to a result; a warning's text
BLOCK = 2

Warn = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Submitted:
    """What the `prompt_submit` hooks made of a prompt: `blocked` says why it is not sent; `context` is added."""

    blocked: str | None = None
    context: str | None = None


class SessionHooks:
    """The hooks of one session (a task's tool calls run through its parent's)."""

    def __init__(
        self, hooks: Sequence[Hook], session_id: str, cwd: str, warn: Warn, problems: Sequence[str] = ()
    ) -> None:
        self._hooks = tuple(hooks)
        self._session_id = session_id
        self._cwd = cwd
        self._warn = warn
        self._problems = tuple(problems)
        self._started: anyio.Event | None = None
        self._start_context: str | None = None

    @classmethod
    def of(cls, cfg: Config, session_id: str, cwd: str, warn: Warn) -> SessionHooks | None:
        """The config's hooks for a session; None when it has none (nothing to run, nothing to read)."""
        if not cfg.hooks:
            return None
        loaded = config_hooks(cfg)
        report(loaded.problems)
        return cls(loaded.hooks, session_id, cwd, warn, loaded.problems)

    # --- tools --------------------------------------------------------------------------------------------

    async def pre_tool(self, tool: str, args: Mapping[str, object]) -> ToolResult | None:
        """None: the call runs; else the result the call gets instead (a hook blocked it)."""
        for hook in self._for("pre_tool", tool):
            ran = await self._run(hook, {"tool_name": tool, "tool_input": dict(args)}, blocks=True)
            if ran.code == BLOCK:
                why = ran.stderr.strip() or "The person's hook refused this call without saying why."
                return ToolResult(f"{why}\n\n[blocked by the person's pre_tool hook `{hook.label}`]", is_error=True)
        return None

    async def post_tool(self, tool: str, args: Mapping[str, object], result: ToolResult) -> ToolResult:
        """The call's result, with what a hook that exits 2 says after it."""
        for hook in self._for("post_tool", tool):
            shown = {"text": result.text, "is_error": result.is_error}
            payload = {"tool_name": tool, "tool_input": dict(args), "tool_result": shown}
            ran = await self._run(hook, payload, blocks=True)
            if ran.code == BLOCK and (note := _cut(ran.stderr.strip(), MAX_NOTE_CHARS)):
                text = f"{result.text}\n\n[the person's post_tool hook `{hook.label}` says: {note}]"
                result = msgspec.structs.replace(result, text=text)
        return result

    # --- prompts and the session --------------------------------------------------------------------------

    async def prompt_submit(self, prompt: str) -> Submitted:
        added: list[str] = []
        for hook in self._for("prompt_submit"):
            ran = await self._run(hook, {"prompt": prompt}, blocks=True)
            if ran.code == BLOCK:
                why = _cut(ran.stderr.strip(), MAX_NOTE_CHARS) or "it gave no reason"
                return Submitted(blocked=f"Your prompt was not sent: the hook `{hook.label}` stopped it: {why}")
            if ran.code == 0:
                added.append(ran.stdout)
        return Submitted(context=_context("prompt_submit", added))

    async def session_start(self, source: str) -> None:
        """Once a live session (`source`: "new", or "load" for a session opened again); a second caller waits
        for the first. Its context is kept for the next prompt (`take_start_context`)."""
        if self._started is not None:
            await self._started.wait()
            return
        self._started = anyio.Event()
        try:
            for problem in self._problems:
                await self._warn(f"Hook ignored: {problem}")
            added = [
                ran.stdout
                for hook in self._for("session_start")
                if (ran := await self._run(hook, {"source": source}, blocks=False)).code == 0
            ]
            self._start_context = _context("session_start", added)
        finally:
            self._started.set()

    def take_start_context(self) -> str | None:
        context, self._start_context = self._start_context, None
        return context

    async def stop(self, stop_reason: str) -> None:
        for hook in self._for("stop"):
            await self._run(hook, {"stop_reason": stop_reason}, blocks=False)

    # --- running ------------------------------------------------------------------------------------------

    def _for(self, event: str, tool: str | None = None) -> list[Hook]:
        return [h for h in self._hooks if h.event == event and (tool is None or h.matches(tool))]

    async def _run(self, hook: Hook, payload: Mapping[str, object], blocks: bool) -> Ran:
        """Run one hook; an end that means nothing at this point (not 0, nor 2 where 2 blocks) is a warning."""
        head: dict[str, object] = {"event": hook.event, "session_id": self._session_id, "cwd": self._cwd}
        env = {"AMA_HOOK_EVENT": hook.event, "AMA_SESSION_ID": self._session_id, "AMA_PROJECT_DIR": self._cwd}
        ran = await run_hook(hook, {**head, **payload}, self._cwd, env)
        if ran.code == 0 or (ran.code == BLOCK and blocks):
            return ran
        how = ran.trouble or f"exited with status {ran.code}"
        said = _cut(ran.stderr.strip(), MAX_NOTE_CHARS)
        await self._warn(f"The {hook.event} hook `{hook.label}` ({hook.where}) {how}" + (f": {said}" if said else ""))
        return ran


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [+{len(text) - limit} chars]"


def _context(event: str, texts: list[str]) -> str | None:
    """What hooks printed, as one block the model reads (bounded), or None when they printed nothing."""
    text = "\n".join(t.strip() for t in texts if t.strip())
    if not text:
        return None
    return f'<hook_context event="{event}">\n{_cut(text, MAX_CONTEXT_CHARS)}\n</hook_context>'
