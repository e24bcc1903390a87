"""The permission policy and memory take any path the model can write (hypothesis).

Location paths come from tool arguments: JSON text, so NUL characters and lone surrogates included. The
approver refuses what `path_problem` names; everything else must go through `Approvals` without raising.
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.permissions import Approvals, decide, path_problem
from tests.support.hypothesis_profiles import examples

FUZZ = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(300))

# Paths as the model writes them: any code point (surrogates too), biased towards path-like pieces.
pieces = st.one_of(
    st.text(min_size=0, max_size=12),
    st.sampled_from(["/", "..", ".", "~", "\0", "\ud800", "\udcff", "/etc", "/tmp", " ", "//"]),
)
paths = st.lists(pieces, min_size=1, max_size=6).map("".join)


def test_path_problem_names_what_no_file_can_hold():
    assert path_problem("/tmp/a\0b") == "contains a NUL character"
    assert "surrogate" in (path_problem("/tmp/\ud800") or "")
    assert path_problem("/tmp/caf\u00e9") is None
    assert path_problem("/tmp/raw-\udcff") is None  # an undecodable byte, as os.fsdecode gives it: a real name


@settings(max_examples=FUZZ, deadline=None)
@given(
    kind=st.sampled_from(["read", "edit", "delete", "move", "execute", "search", "fetch", "think", "other"]),
    remembered=st.lists(st.tuples(paths, st.booleans()), max_size=4),
    asked=st.lists(paths, max_size=4),
    mode=st.sampled_from(["manual", "accept_edits", "read_only", "full_access"]),
)
def test_the_memory_answers_for_any_usable_path(kind, remembered, asked, mode):
    memory = Approvals()
    for path, allowed in remembered:
        if path_problem(path) is None:
            memory.remember(kind, [path], allowed)
    usable = [p for p in asked if path_problem(p) is None]
    verdict = memory.remembered(kind, usable)
    assert verdict in (True, False, None)
    assert decide(mode, kind, not usable) in ("allow", "ask", "deny")
    if mode == "full_access":
        assert decide(mode, kind, not usable) == "allow"
