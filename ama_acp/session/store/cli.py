"""`ama sessions list [--all]|show ID|delete ID|search TEXT [--json]`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ama_acp.config import Config
    from ama_acp.conversation.messages import Message
    from ama_acp.session.store.listing import SessionSummary
    from ama_acp.session.store.session_store import LoadedSession, SessionStore


def run_sessions(argv: list[str], load_config: Callable[[argparse.Namespace], Config]) -> int:
    p = argparse.ArgumentParser(prog="ama sessions", description="the stored sessions")
    p.add_argument("action", choices=["list", "show", "delete", "search"])
    p.add_argument("session_id", nargs="?", metavar="ID|TEXT", help="show, delete: a session id; search: the text")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cwd", help="list, search: only sessions of this directory (a project)")
    p.add_argument(
        "--all",
        action="store_true",
        help="list, search: also sessions nobody prompted (as session/list hides them)",
    )
    p.add_argument("--config")
    p.add_argument("--data-dir")
    args = p.parse_args(argv)
    cfg = load_config(args)
    from ama_acp.session.store.session_store import SessionBusy, SessionFormatError, SessionNotFound, SessionStore
    from ama_acp.textsafe import one_line

    store = SessionStore(cfg.data_dir)
    if args.action == "list":
        return _list(store, args.cwd, args.json, spoken_only=not args.all)
    if args.action == "search":
        from ama_acp.session.store.search import MAX_QUERY

        if not args.session_id or len(args.session_id) > MAX_QUERY:
            p.error(f"search needs a text of 1 to {MAX_QUERY} characters")
        return _search(store, args.session_id, args.cwd, args.json, spoken_only=not args.all)
    if not args.session_id:
        p.error(f"{args.action} needs a session id")
    try:
        if args.action == "delete":
            store.delete(args.session_id)
            sys.stdout.write(f"deleted {args.session_id}\n")
            return 0
        loaded = store.read(args.session_id)
    except SessionNotFound:
        sys.stderr.write(f"ama: no session {args.session_id}\n")
        return 1
    except (SessionBusy, SessionFormatError) as exc:  # open in another process; a FIFO, a directory, a newer format
        sys.stderr.write(f"ama: {one_line(str(exc))}\n")
        return 1
    return _show(loaded, args.json)


def _all_rows(store: SessionStore, cwd: str | None, spoken_only: bool) -> list[SessionSummary]:
    rows: list[SessionSummary] = []
    cursor = None
    while True:
        page, cursor = store.list(cwd, cursor, 200, spoken_only=spoken_only)
        rows += page
        if cursor is None:
            return rows


def _list(store: SessionStore, cwd: str | None, as_json: bool, *, spoken_only: bool = True) -> int:
    from ama_acp.textsafe import one_line

    rows = _all_rows(store, cwd, spoken_only)
    if as_json:
        sys.stdout.write(json.dumps([_summary(s) for s in rows], indent=2) + "\n")
        return 0
    for s in rows:  # a session file is anyone's writing: each field one line, its controls visible
        fields = (s.session_id, s.updated_at, s.cwd, s.title or "(untitled)")
        sys.stdout.write("  ".join(one_line(str(f)) for f in fields) + "\n")
    if not rows:
        sys.stdout.write("no sessions\n")
    return 0


def _search(store: SessionStore, text: str, cwd: str | None, as_json: bool, *, spoken_only: bool) -> int:
    """The sessions (newest first, as `list`) whose title or messages hold `text`; exit 0 with hits, 1 without."""
    from ama_acp.session.store.reader import MAX_LINE_BYTES
    from ama_acp.session.store.search import search_file
    from ama_acp.textsafe import one_line

    hits = []
    for s in _all_rows(store, cwd, spoken_only):
        found = search_file(store.path(s.session_id), text, MAX_LINE_BYTES)
        if found is not None and (found.matches or found.title):
            hits.append((s, found))
    if as_json:
        out = [
            {
                **_summary(s),
                "titleMatches": found.title,
                "messageMatches": found.matches,
                "excerpts": [{"message": m.index, "role": m.role, "excerpt": m.excerpt} for m in found.shown],
            }
            for s, found in hits
        ]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0 if hits else 1
    for s, found in hits:  # anyone's writing: each field one line, its controls visible
        fields = (s.session_id, s.updated_at, s.cwd, s.title or "(untitled)")
        sys.stdout.write("  ".join(one_line(str(f)) for f in fields) + "\n")
        title = "; the title matches" if found.title else ""
        sys.stdout.write(f"  {found.matches} message(s) match{title}\n")
        for m in found.shown:
            sys.stdout.write(f"    [{m.role}] {one_line(m.excerpt)}\n")
    if not hits:
        sys.stdout.write(f"no session holds {one_line(repr(text))}\n")
    return 0 if hits else 1


def _summary(s: SessionSummary) -> dict[str, str | None]:
    return {
        "sessionId": s.session_id,
        "cwd": s.cwd,
        "title": s.title,
        "updatedAt": s.updated_at,
        "createdAt": s.created_at,
    }


def _show(loaded: LoadedSession, as_json: bool) -> int:
    if as_json:
        import msgspec

        sys.stdout.write(
            json.dumps({"header": msgspec.to_builtins(loaded.header), "entries": msgspec.to_builtins(loaded.entries)})
            + "\n"
        )
        return 0
    sys.stdout.write("\n".join(_lines(loaded)) + "\n")
    return 0


def _lines(loaded: LoadedSession) -> list[str]:
    import msgspec

    from ama_acp.session.store import entries as en
    from ama_acp.textsafe import one_line

    # What the file says is shown, never obeyed: a message's text keeps its lines (`visible`, in `_message_line`),
    # every other field is one line (`one_line`), each with its controls made visible (ama_acp/textsafe.py).
    h = loaded.header
    sid, created, cwd = (one_line(str(f)) for f in (h.session_id, h.created_at, h.cwd))
    out = [f"session {sid}  created {created}  in {cwd}"]
    for e in loaded.entries:
        if isinstance(e, en.MessageEntry):
            line = _message_line(e.message)
            if line is not None:
                out.append(line)
        elif isinstance(e, en.ToolCallEntry):
            out.append(f"  ▸ {one_line(str(e.title))} [{one_line(str(e.kind))}] {one_line(str(e.status))}")
        elif isinstance(e, en.UsageEntry):
            cost = f" ${e.cost:.6f}" if e.cost is not None else ""
            out.append(one_line(f"  (usage {e.purpose}: {msgspec.to_builtins(e.usage)}{cost})"))
        elif isinstance(e, en.TitleEntry):
            out.append(f"title: {one_line(str(e.title))}")
    if loaded.torn_tail:
        out.append("(the last line was torn by a crash and was skipped)")
    return out


def _message_line(m: Message) -> str | None:
    """A message as `show` prints it: a person's prompt with its images marked, a reply's text; tool results and
    empty messages are left out."""
    from ama_acp.textsafe import visible

    role = type(m).__name__.replace("Message", "").lower()
    if role == "toolresult":
        return None
    text = (
        getattr(m, "text", "")
        if not hasattr(m, "content") or role != "user"
        else "".join(getattr(p, "text", "[image]") for p in m.content)
    )
    return f"[{role}] {visible(str(text)[:500])}" if text else None
