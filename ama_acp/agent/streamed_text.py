"""The text of a reply as it streams, kept once: `StreamedText` collects the deltas of one text or thinking part.

Deltas are listed as they come (the hot path only appends); every `FOLD_CHARS` of them are folded into one
UTF-8 buffer that grows in place, and the part's string is decoded from it once, at the end. A plain list of
deltas joined at the end holds the reply twice, and worse: the allocator keeps the freed deltas' memory resident,
so a 255 MiB reply stayed at three times its size in `ama -p` (docs/errors.md "Limits"). Folded, the deltas
listed at any time are at most `FOLD_CHARS`, and the buffer is returned to the system when it is freed.

Lone surrogates (a JSON `\\ud800` escape decodes to one) pass through the buffer unchanged ("surrogatepass"
encodes and decodes each on its own), so the string is exactly the deltas joined.
"""

from __future__ import annotations

FOLD_CHARS = 1 << 20  # deltas listed before they are folded: below this a reply is simply joined


class StreamedText:
    __slots__ = ("_deltas", "_chars", "_folded")

    def __init__(self) -> None:
        self._deltas: list[str] = []
        self._chars = 0
        self._folded = bytearray()

    def __bool__(self) -> bool:
        """Whether any delta came (an empty one too: it still makes a part, as a joined list did)."""
        return bool(self._deltas or self._folded)

    def add(self, delta: str) -> None:
        self._deltas.append(delta)
        self._chars += len(delta)
        if self._chars >= FOLD_CHARS:
            self._fold()

    def take(self) -> str:
        """The deltas joined; empty again afterwards."""
        if self._folded:
            self._fold()
            text = self._folded.decode("utf-8", "surrogatepass")
            self._folded = bytearray()
        else:
            text = "".join(self._deltas)
            self._deltas = []
            self._chars = 0
        return text

    def _fold(self) -> None:
        self._folded += "".join(self._deltas).encode("utf-8", "surrogatepass")
        self._deltas = []
        self._chars = 0
