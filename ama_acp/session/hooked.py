"""The session's side of the person's hooks (shaping/hook_points.py): what the prompt path does with the
`session_start` and `prompt_submit` hooks, and how a hook's warning reaches the person."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.wire import types as w
from ama_acp.wire.warning import warning

if TYPE_CHECKING:  # a session has hooks only when the config lists some: made by live.py then
    from ama_acp.shaping.hook_points import SessionHooks, Warn

Send = Callable[[w.SessionUpdate], Awaitable[None]]


def warner(send: Send, notices: Callable[[], bool]) -> Warn:
    """A hook's warning as an ACP `notice` when the client takes them (`notices()`), else an agent message."""

    async def warn(text: str) -> None:
        await send(warning(notices(), "Hook", text))

    return warn


async def submitted(hooks: SessionHooks, user: UserMessage, source: str, send: Send) -> UserMessage | None:
    """The prompt as the model gets it: with what the `session_start` hooks (once) and the `prompt_submit` hooks
    printed added after the person's text, counted by the meter with the message. None: a hook stopped it (the
    person is told why, nothing is sent)."""
    await hooks.session_start(source)  # a prompt that comes first waits for the session's start hooks
    verdict = await hooks.prompt_submit(_text(user))
    if verdict.blocked is not None:
        await send(w.AgentMessageChunk(content=w.TextContent(text=f"⚠ {verdict.blocked}\n")))
        return None
    added = [TextPart(c) for c in (hooks.take_start_context(), verdict.context) if c]
    return msgspec.structs.replace(user, content=[*user.content, *added]) if added else user


def _text(user: UserMessage) -> str:
    return "\n".join(p.text for p in user.content if isinstance(p, TextPart))
