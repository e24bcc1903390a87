"""`ama -p PROMPT`: one prompt, the answer on stdout, then exit.

It runs the same session and agent loop as `--mode acp`, with an in-process peer instead of stdio. There is
nobody to ask for permission, so anything the mode would ask about is refused (the model is told); set
`mode = "full_access"` or `accept_edits` in the config to let edits go ahead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import msgspec

from ama_acp.config import Config
from ama_acp.conversation.messages import valid_unicode


class _LocalPeer:
    """Stands in for the editor: collects updates; refuses permission requests."""

    def __init__(self, stream_text: bool) -> None:
        self.text: list[str] = []
        self.usage: dict[str, Any] | None = None
        self._stream = stream_text
        self._message_id: str | None = None

    async def notify(self, method: str, params: Any) -> None:
        update = msgspec.to_builtins(params)["update"]
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk":
            piece = update["content"]["text"]
            mid = update.get("messageId")
            if self.text and mid != self._message_id:
                piece = "\n\n" + piece  # a new assistant message starts a new paragraph
            self._message_id = mid
            self.text.append(piece)
            if self._stream:
                sys.stdout.write(piece)
                sys.stdout.flush()
        elif kind == "usage_update":
            self.usage = update
        elif kind == "tool_call":
            sys.stderr.write(f"▸ {update['title']}\n")

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        if method == "session/request_permission":
            title = msgspec.to_builtins(params)["toolCall"].get("title", "")
            sys.stderr.write(f"✗ refused (no one to ask in -p mode): {title}\n")
            return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}
        raise RuntimeError(f"{method} is not available in -p mode")


def context_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """`context` of the json output: {tokens, window, percent}, each only when known (U15); the full figures
    are in `_ama/session_stats`."""
    out: dict[str, Any] = {"tokens": stats["contextTokens"]}
    for key, stat in (("window", "contextWindow"), ("percent", "contextPercent")):
        if stat in stats:
            out[key] = stats[stat]
    return out


def run_print(args: argparse.Namespace, cfg: Config) -> int:
    from ama_acp.logs import setup_logging
    from ama_acp.providers.resolve import usable_model
    from ama_acp.session.manager import SessionManager
    from ama_acp.wire import types as w

    setup_logging(cfg.data_dir, args.log_level)
    choice = usable_model(cfg, args.model)
    if choice.model_id is None:  # never the demo script in place of a model the person did not choose
        sys.stderr.write(f"ama: {choice.why}\n")
        return 2
    model_id = choice.model_id
    as_json = args.output_format == "json"
    peer = _LocalPeer(stream_text=not as_json)
    cwd = os.path.abspath(args.cwd or os.getcwd())

    async def main() -> dict[str, Any]:
        manager = SessionManager(cfg, peer, default_model=model_id)
        session = manager.new_session(cwd, None, [])
        # argv holds the OS's bytes: one that is not UTF-8 arrives as a lone surrogate, which no file can store.
        result = await session.prompt([w.TextContent(text=valid_unicode(args.prompt))])
        stats = session.stats()
        await manager.shutdown()
        out: dict[str, Any] = {
            "sessionId": session.id,
            "model": model_id,
            "answer": "".join(peer.text),
            "stopReason": result.stop_reason,
            "usage": msgspec.to_builtins(result.usage) if result.usage else None,
            "context": context_summary(stats),
        }
        if "cost" in stats:  # U17: only when known
            out["cost"] = stats["cost"]
        return out

    out = anyio.run(main)
    if as_json:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    else:
        if not out["answer"].endswith("\n"):
            sys.stdout.write("\n")
    return 0 if out["stopReason"] in ("end_turn", "max_tokens") else 1
