"""How deep an HTML page's elements nest, estimated from above in one pass (docs/tools.md "web_fetch").

The converter (html-to-markdown, native code) walks the tree a parser builds, and a native crash cannot be
caught: it ends the whole process, every session's turn with it. So web_fetch measures the nesting first and
converts a page nested past NESTING_LIMIT in a process of its own (tools/web/page.py), where a crash costs only
that call.

The estimate errs upwards, never down, where it matters: every start tag a parser could see is counted (those in
comments and attribute values too), `<x/>` nests like `<x>` (it does in HTML), an end tag closes only an element
open under its name, and only the end tags a parser infers for sure (`<li>` after an open `<li>` of the same
list, `<p>` before a block, table cells and rows, options, `<dt>`/`<dd>`) close anything unasked. What is
skipped is what no parser reads as tags: the text of `<script>` and `<style>`, up to the first `</script` or
`</style` (a parser ends them there or later, never sooner).

Time is linear in the page, whatever it holds: each tag is read once by a regex without nested repetition,
each element is pushed once and popped at most once, and each step looks at a fixed number of names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NESTING_LIMIT = 1_000  # deeper pages are converted in a process of their own

# A tag as HTML's tokenizer starts one: `<`, an optional `/`, a letter, then anything up to white space, `/`, `>`.
_TAG = re.compile(r"<(/?[a-z][^\t\n\f\r />]*)")
# A script or style element's start and its text, up to the first `</script` (`</style`) or the end of the page;
# possessive, so nothing is read twice.
_RAW = re.compile(r"<(script|style)\b(?:[^<]++|<(?!/\1))*+")
_VOID = frozenset(
    "area base basefont bgsound br col embed frame hr img input keygen link meta param source track wbr".split()
)
# Start tags that close an open element of their group, unless an element of `bounds` opened after it.
_TABLE_BOUNDS = ("table", "template", "html")
_IMPLIED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "li": (("li",), ("ul", "ol", "menu", *_TABLE_BOUNDS)),
    "dt": (("dt", "dd"), ("dl", *_TABLE_BOUNDS)),
    "dd": (("dt", "dd"), ("dl", *_TABLE_BOUNDS)),
    "td": (("td", "th"), ("tr", *_TABLE_BOUNDS)),
    "th": (("td", "th"), ("tr", *_TABLE_BOUNDS)),
    "tr": (("tr",), ("tbody", "thead", "tfoot", *_TABLE_BOUNDS)),
    "option": (("option",), ("select", "datalist", "optgroup", *_TABLE_BOUNDS)),
}
# A `<p>` is closed by the start of any of these, unless one of `_P_BOUNDS` opened after it (button scope).
_CLOSES_P = frozenset(
    """address article aside blockquote center details dialog dir div dl dd dt fieldset figcaption figure footer
    form h1 h2 h3 h4 h5 h6 header hgroup hr li listing main menu nav ol p pre section summary table ul xmp""".split()
)
_P_BOUNDS = ("button", "applet", "caption", "marquee", "object", "td", "th", *_TABLE_BOUNDS)


@dataclass(frozen=True)
class Nesting:
    depth: int  # the deepest the estimate reached
    steps: int  # tags read plus elements pushed and popped: what the pass cost (at most linear in the page)


def nesting(page: str) -> Nesting:
    """The estimate for `page` (see the module's docstring)."""
    stack: list[str] = []
    where: dict[str, list[int]] = {}  # each open name → its positions in `stack`, innermost last
    deepest = steps = 0

    def last(names: tuple[str, ...]) -> int:
        found = -1
        for n in names:
            at = where.get(n)
            if at and at[-1] > found:
                found = at[-1]
        return found

    def pop_to(index: int) -> int:
        popped = len(stack) - index
        while len(stack) > index:
            where[stack.pop()].pop()
        return popped

    for name in _TAG.findall(_RAW.sub(r"<\1>", page.lower())):
        steps += 1
        if name[0] == "/":
            if where.get(name[1:]):
                steps += pop_to(where[name[1:]][-1])
            continue
        if name in _VOID:
            continue
        implied = _IMPLIED.get(name)
        if implied is not None and (open_at := last(implied[0])) >= 0 and open_at > last(implied[1]):
            steps += pop_to(open_at)
        if name in _CLOSES_P and where.get("p") and (p_at := where["p"][-1]) > last(_P_BOUNDS):
            steps += pop_to(p_at)
        where.setdefault(name, []).append(len(stack))
        stack.append(name)
        steps += 1
        if len(stack) > deepest:
            deepest = len(stack)
    return Nesting(deepest, steps)
