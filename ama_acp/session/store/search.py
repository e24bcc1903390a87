"""`ama sessions search TEXT`: which stored sessions hold a text, in their title or in what the person and the
model said, a line at a time.

A session file can be large and is anyone's writing, so the search never holds a whole file: it reads a
megabyte at a time, decodes only the lines that can hold a message, title or rewind (each at most the store's
line cap; a longer line is passed over as it is read, like the reader does), and keeps only the few
excerpts it shows. Matching is a plain case-folded substring search (no pattern language: nothing a hostile
text could make slow), with the text bounded (`MAX_QUERY`). Rewinds are applied as every reader of the file
applies them (session/store/rewound_thread.py): a message the person rewound away is not found.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path

import msgspec

from ama_acp.conversation.messages import AssistantMessage, TextPart, UserMessage
from ama_acp.session.store import entries as en
from ama_acp.session.store.files import NotRegularFile, open_regular

log = logging.getLogger(__name__)

MAX_QUERY = 200  # characters: a search text longer than this is refused (exit 2), not cut
SHOWN = 3  # excerpts kept per session: the first matches of the thread as it stands
_EXCERPT = 60  # characters shown either side of a match
_CHUNK = 1 << 20
# The lines that matter start with these tags (every line starts with its tag: entries.py, listing.py).
_WANTED = (b'{"t":"msg",', b'{"t":"title",', b'{"t":"rewind",')
_HEAD = max(len(w) for w in _WANTED)
_decoder = msgspec.json.Decoder(en.Entry)


class Match(msgspec.Struct, frozen=True):
    """One message that holds the text: its place in the thread, who said it, an excerpt around the match."""

    index: int
    role: str  # "user" (the person) or "assistant"
    excerpt: str


class Found(msgspec.Struct):
    """What the search found in one session file: how many messages hold the text, the first few of them, and
    whether its last title does."""

    matches: int = 0
    shown: list[Match] = []
    title: bool = False


def whole_lines(chunks: Iterable[bytes], max_line: int) -> Iterator[bytes]:
    """The complete lines of a file's bytes (cut anywhere) that start with one of `_WANTED`, without their newline,
    in time linear in the bytes. A line is held only while its first bytes may be a wanted tag and it is at most
    `max_line` long; once they say otherwise, the rest of it is passed over to its newline unread, however long.
    A torn last line (no newline) is not a line."""
    pending: list[bytes] = []
    pending_len = 0
    keep = True  # False: the pending line is not wanted, or too long
    for chunk in chunks:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            if keep and end > start:
                before, pending_len = pending_len, pending_len + end - start
                pending.append(chunk[start:end])
                # The head is looked at until it is whole (then decided), so a long line costs no rescans.
                keep = pending_len <= max_line and (before >= _HEAD or _may_be_wanted(pending))
                if not keep:
                    pending = []
            elif not keep:
                pending_len += end - start
            if nl < 0:
                break
            if keep and pending:
                line = b"".join(pending) if len(pending) > 1 else pending[0]
                if pending_len >= _HEAD or line.startswith(_WANTED):  # a short line may have been a tag's start
                    yield line
            pending, pending_len, keep = [], 0, True
            start = nl + 1


def _may_be_wanted(pending: list[bytes]) -> bool:
    """Whether a line whose first pieces are `pending` starts, or may yet start, with a wanted tag."""
    head = b"".join(p[:_HEAD] for p in pending)[:_HEAD]
    return any(head.startswith(w) or w.startswith(head) for w in _WANTED)


def search_file(path: Path, query: str, max_line: int) -> Found | None:
    """What `query` (case-folded, plain text) finds in the session file at `path`; None when the file is gone or
    is not a regular file (never opened then: session/store/files.py)."""
    try:
        fd, _ = open_regular(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except NotRegularFile as exc:
        log.warning("%s is %s, not a session file; not searched", path, exc.kind)
        return None
    with open(fd, "rb", buffering=0) as f:
        return search_lines(whole_lines(iter(partial(f.read, _CHUNK), b""), max_line), query)


def search_lines(lines: Iterable[bytes], query: str) -> Found:
    """The search over a session file's lines (as `whole_lines` gives them). A line that does not decode costs
    that line, as in the reader."""
    needle = query.casefold()
    thread = _Thread(needle)
    for line in lines:
        try:
            entry = _decoder.decode(line)
        except (msgspec.DecodeError, RecursionError):
            continue
        thread.apply(entry)
    return thread.found()


class _Thread:
    """The thread as the file's entries build it, reduced to what the search needs: for each message whether it
    is the person's prompt (a rewind names one), and the matching messages."""

    def __init__(self, needle: str) -> None:
        self.needle = needle
        self.prompts = bytearray()  # one byte a message of the thread: 1 for the person's prompt
        self.matched: list[int] = []  # indices of the messages that hold the text, ascending
        self.shown: list[Match] = []  # the first SHOWN of them
        self.title = False

    def apply(self, entry: en.Entry) -> None:
        if isinstance(entry, en.MessageEntry):
            self._message(entry.message)
        elif isinstance(entry, en.TitleEntry):
            self.title = self.needle in str(entry.title).casefold()
        elif isinstance(entry, en.RewindEntry):
            self._rewind(entry.message_index)

    def _message(self, message: object) -> None:
        index = len(self.prompts)
        person = isinstance(message, UserMessage) and message.origin != "ama"
        self.prompts.append(1 if person else 0)
        if isinstance(message, UserMessage) and person:
            role, text = "user", "".join(p.text for p in message.content if isinstance(p, TextPart))
        elif isinstance(message, AssistantMessage):
            role, text = "assistant", message.text
        else:  # tool results and ama's own notes to the model are not what a person searches
            return
        excerpt = _excerpt(text, self.needle)
        if excerpt is None:
            return
        self.matched.append(index)
        if len(self.shown) < SHOWN:
            self.shown.append(Match(index, role, excerpt))

    def _rewind(self, index: int) -> None:
        # As rewound_thread.py: a rewind that names no prompt of the thread is ignored.
        if not 0 <= index < len(self.prompts) or not self.prompts[index]:
            return
        del self.prompts[index:]
        while self.matched and self.matched[-1] >= index:
            self.matched.pop()
        # `shown` is the first matches of `matched`, so what the rewind leaves of it still is.
        self.shown = [m for m in self.shown if m.index < index]

    def found(self) -> Found:
        return Found(matches=len(self.matched), shown=list(self.shown), title=self.title)


def _excerpt(text: str, needle: str) -> str | None:
    """The text around the first match of `needle` (case-folded), or None when it is not there."""
    folded = text.casefold()
    at = folded.find(needle)
    if at < 0:
        return None
    # Case folding can change a text's length (ß → ss): then the excerpt is cut from the folded text.
    source = text if len(folded) == len(text) else folded
    start, end = max(0, at - _EXCERPT), min(len(source), at + len(needle) + _EXCERPT)
    return ("…" if start else "") + source[start:end] + ("…" if end < len(source) else "")
