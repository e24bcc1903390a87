"""`ama -p PROMPT`: one prompt, the answer on stdout, then exit.

It runs the same session and agent loop as `--mode acp`, with an in-process peer instead of stdio. There is
nobody to ask for permission, so anything the mode would ask about is refused (the model is told); set
`mode = "full_access"` or `accept_edits` in the config to let edits go ahead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import msgspec

from ama_acp.config import Config
from ama_acp.conversation.messages import valid_unicode
from ama_acp.textsafe import json_safe, one_line, visible

if TYPE_CHECKING:
    from ama_acp.session.live import Session

log = logging.getLogger(__name__)


class _Stdout:
    """stdout, which the reader may close (`ama -p … | head`): the first write that finds it closed stops the turn
    as SIGPIPE would stop a shell command (`on_closed`), and every later write is dropped, never a traceback."""

    def __init__(self) -> None:
        self.closed = False
        self.on_closed: Callable[[], None] = lambda: None

    def write(self, text: str, flush: bool = False) -> None:
        if self.closed:
            return
        try:
            sys.stdout.write(text)
            if flush:
                sys.stdout.flush()
        except BrokenPipeError:
            self.closed = True
            # What is still buffered would fail again as Python exits ("Exception ignored …"): stdout now goes
            # nowhere.
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            self.on_closed()


STDOUT = _Stdout()


class _TextAnswer:
    """The answer as plain text: each piece on stdout as it arrives, with its controls made visible (lines kept).
    Nothing of it is kept but whether it ends a line: a long answer costs no memory here."""

    def __init__(self) -> None:
        self.ends_line = False

    def piece(self, text: str) -> None:
        if not text:
            return
        STDOUT.write(visible(text), flush=True)  # the model's text: shown, never obeyed
        self.ends_line = text.endswith("\n")

    def finish(self, rest: dict[str, Any]) -> None:
        if not self.ends_line:
            STDOUT.write("\n")


class _JsonAnswer:
    """The json output, with the answer written into it as it arrives: the document's head (up to the answer's
    opening quote) before the first piece, each piece escaped as the whole string would be (JSON and `json_safe`
    escape one character at a time), the rest after the turn. The same bytes as one `json.dumps` of the whole
    document, without the answer ever held whole, joined or re-encoded."""

    def __init__(self, head: dict[str, Any]) -> None:
        self._head: dict[str, Any] | None = head

    def _open(self) -> None:
        if self._head is not None:
            STDOUT.write(_json(self._head)[:-1] + ', "answer": "')
            self._head = None

    def piece(self, text: str) -> None:
        if not text:
            return
        self._open()
        STDOUT.write(_json(text)[1:-1], flush=True)

    def finish(self, rest: dict[str, Any]) -> None:
        self._open()
        STDOUT.write('", ' + _json(rest)[1:] + "\n")


def _json(value: Any) -> str:
    # JSON escapes C0 only: DEL, C1 and bidi controls are escaped too, so the JSON on a terminal is inert.
    return json_safe(json.dumps(value, ensure_ascii=False))


class _LocalPeer:
    """Stands in for the editor: writes the answer out as it streams; refuses permission requests."""

    def __init__(self, answer: _TextAnswer | _JsonAnswer) -> None:
        self.answer = answer
        self.usage: dict[str, Any] | None = None
        self._message_id: str | None = None
        self._started = False

    async def notify(self, method: str, params: Any) -> None:
        update = msgspec.to_builtins(params)["update"]
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk":
            piece = update["content"]["text"]
            mid = update.get("messageId")
            if self._started and mid != self._message_id:
                self.answer.piece("\n\n")  # a new assistant message starts a new paragraph
            self._message_id = mid
            self._started = True
            self.answer.piece(piece)
        elif kind == "usage_update":
            self.usage = update
        elif kind == "tool_call":
            sys.stderr.write(f"▸ {one_line(str(update['title']))}\n")

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        if method == "session/request_permission":
            asked = msgspec.to_builtins(params)
            title = asked["toolCall"].get("title", "")
            sys.stderr.write(f"✗ refused (no one to ask in -p mode): {one_line(str(title))}\n")
            # The request's own rejecting option: plan mode's offer names its "Keep planning" otherwise.
            options = [o for o in asked.get("options") or [] if isinstance(o, dict)]
            reject = next((o.get("optionId") for o in options if o.get("kind") == "reject_once"), "reject_once")
            return {"outcome": {"outcome": "selected", "optionId": reject}}
        raise RuntimeError(f"{method} is not available in -p mode")


def context_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """`context` of the json output: {tokens, window, percent}, each only when known (U15); the full figures
    are in `_ama/session_stats`."""
    out: dict[str, Any] = {"tokens": stats["contextTokens"]}
    for key, stat in (("window", "contextWindow"), ("percent", "contextPercent")):
        if stat in stats:
            out[key] = stats[stat]
    return out


# `ama -p`'s exit statuses (docs/errors.md "Signals and exit codes"). 2 (usage) is also argparse's and the bad
# config's (cli.py); a stop signal gives 128 + its number, as a shell reports a command it killed.
EXIT_ANSWERED = 0
EXIT_FAILED = 1  # no complete answer: the provider failed after its retries, refused the key, ama's own error
EXIT_USAGE = 2  # no usable model (as a bad flag or a bad config file)

# SIGINT: Ctrl-C. SIGTERM: a script or a service manager stopping it. SIGHUP: the terminal it ran in closed.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupted_status(signum: int) -> int:
    return 128 + signum


class _Stop:
    """The stop signal that ended the turn, if one did; later ones only wait for the clean-up to finish."""

    def __init__(self) -> None:
        self.signum: int | None = None


async def _cancel_on_signal(
    session: Session,
    whole: anyio.CancelScope,
    stop: _Stop,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Until cancelled (after the clean-up): the first stop signal cancels the turn as session/cancel does (the
    command's process tree is killed, what streamed is kept); before or after the turn, the whole run. The signals
    stay caught meanwhile, so a second one cannot kill ama before it has stopped what it started."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            name = signal.Signals(signum).name
            if stop.signum is not None:
                log.warning("%s received again; ama is already stopping what it started", name)
                continue
            log.info("%s received; cancelling the turn", name)
            stop.signum = signum
            if session.busy:
                session.cancel()
            else:
                whole.cancel()


def run_print(args: argparse.Namespace, cfg: Config) -> int:
    from ama_acp.logs import setup_logging
    from ama_acp.providers.resolve import usable_model
    from ama_acp.session.manager import SessionManager
    from ama_acp.wire import types as w

    setup_logging(cfg.data_dir, args.log_level)
    choice = usable_model(cfg, args.model)
    if choice.model_id is None:  # never the demo script in place of a model the person did not choose
        sys.stderr.write(f"ama: {choice.why}\n")
        return EXIT_USAGE
    model_id = choice.model_id
    as_json = args.output_format == "json"
    peer = _LocalPeer(_TextAnswer())  # json: replaced once the session has its id, before the turn
    cwd = os.path.abspath(args.cwd or os.getcwd())
    stop = _Stop()

    async def main() -> dict[str, Any]:
        manager = SessionManager(cfg, peer, default_model=model_id)
        session = manager.new_session(cwd, None, [])
        STDOUT.on_closed = lambda: _stop_for_closed_stdout(session, stop)
        if as_json:
            peer.answer = _JsonAnswer({"sessionId": session.id, "model": model_id})
        result: w.PromptResponse | None = None
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as whole:
                await tg.start(_cancel_on_signal, session, whole, stop)
                try:
                    # argv holds the OS's bytes: one not UTF-8 arrives as a lone surrogate, which no file can store.
                    result = await session.prompt([w.TextContent(text=valid_unicode(args.prompt))])
                finally:
                    stats = session.ctx.stats()
                    with anyio.CancelScope(shield=True):  # the session file closed, its servers stopped
                        await manager.shutdown()
            tg.cancel_scope.cancel()  # the signals are caught until here: the clean-up is over
        out: dict[str, Any] = {  # the json output after its answer, which is already written
            "stopReason": result.stop_reason if result is not None and stop.signum is None else "cancelled",
            "usage": msgspec.to_builtins(result.usage) if result is not None and result.usage else None,
            "context": context_summary(stats),
            "error": _error(session.host.turn_error, stop.signum),
        }
        if "cost" in stats:  # U17: only when known
            out["cost"] = stats["cost"]
        out["cache"] = stats["cache"]  # the prompt cache, as _ama/session_stats has it (docs/context.md)
        return out

    out = anyio.run(main)
    peer.answer.finish(out)
    if stop.signum == signal.SIGPIPE:  # the reader had all it wanted: quiet, as a shell command would be
        return interrupted_status(signal.SIGPIPE)
    if stop.signum is not None:
        sys.stderr.write(f"ama: interrupted ({signal.Signals(stop.signum).name})\n")
        return interrupted_status(stop.signum)
    if out["error"] is not None or out["stopReason"] not in ("end_turn", "max_tokens"):
        return EXIT_FAILED
    return EXIT_ANSWERED


def _stop_for_closed_stdout(session: Session, stop: _Stop) -> None:
    """stdout closed by its reader mid-answer: the turn is cancelled (nobody reads the rest, and it costs), as a
    stop signal would; the session keeps what streamed."""
    if stop.signum is None:
        stop.signum = signal.SIGPIPE
        log.info("stdout was closed by its reader; cancelling the turn")
        if session.busy:  # after the turn (its last line), there is nothing to stop
            session.cancel()


def _error(turn_error: tuple[str, str] | None, signum: int | None) -> dict[str, str] | None:
    """The json output's `error`: why there is no complete answer (null when there is one). `kind` is a provider
    failure's kind (auth, rate_limit, server, timeout, stream, bad_request, config), `budget` (the session's budget
    was reached: session/turn/host.py), `internal` or `interrupted`."""
    if signum is not None:
        return {"kind": "interrupted", "message": f"stopped by {signal.Signals(signum).name}"}
    if turn_error is not None:
        kind, message = turn_error
        return {"kind": kind, "message": message}
    return None
