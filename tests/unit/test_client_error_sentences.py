"""The agent's errors read as sentences in `ama acp-client` (issue 25, point 8): the words of `data` meant for a
person (`details`, `reason`, a string `data`, the sign-in methods), each once; never the `data` object."""

from __future__ import annotations

import pytest

from ama_acp.client.errors import RpcError


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, "Refused (-32000)"),
        ({"uri": "/x"}, "Refused (-32000)"),
        ([1, 2], "Refused (-32000)"),
        ("not today", "Refused (-32000). not today."),
        ({"details": "Run `ama setup`."}, "Refused (-32000). Run `ama setup`."),
        ({"reason": "quota", "details": "quota"}, "Refused (-32000). quota."),
        ({"details": "Refused"}, "Refused (-32000)"),
        (
            {"authMethods": [{"id": "a", "name": "Sign in"}, {"id": "b"}, "junk"]},
            "Refused (-32000). Sign-in methods: Sign in, b.",
        ),
    ],
)
def test_sentences(data, expected):
    text = str(RpcError(-32000, "Refused", data))
    assert text == expected
    assert "{" not in text and "[" not in text
