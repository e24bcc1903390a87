"""The estimator: docs/rules.md U1–U6."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys

import pytest

from ama_acp.context import estimate
from ama_acp.context.estimate import (
    IMAGE_TOKENS,
    HeuristicEstimator,
    MessageEstimates,
    TiktokenEstimator,
    heuristic_text_tokens,
    make_estimator,
)
from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)

H = HeuristicEstimator()

# Representative code points of every block U1 names (first, middle and last of the big ones).
CJK_BLOCKS = {
    "CJK Unified Ideographs": "\u4e00\u6c49\u9fff",
    "Ext A": "\u3400\u4dbf",
    "Ext B": "\U00020000\U0002a6df",
    "Ext C-F": "\U0002a700\U0002b740\U0002b820\U0002ceb0\U0002ebe0",
    "Ext G-H": "\U00030000\U00031350",
    "CJK Compatibility Ideographs": "\uf900\ufaff\U0002f800",
    "Hiragana": "\u3042\u309f",
    "Katakana": "\u30a2\u30ff",
    "Katakana Phonetic Extensions": "\u31f0\u31ff",
    "Halfwidth Katakana": "\uff66\uff9d",
    "Hangul Syllables": "\uac00\ud7a3",
    "Hangul Jamo": "\u1100\u11ff",
    "Hangul Compatibility Jamo": "\u3131\u318e",
    "Hangul Jamo Extended A/B": "\ua960\ud7b0",
}
CJK_SAMPLES = [ch for chars in CJK_BLOCKS.values() for ch in chars]
# Neighbours and look-alikes that are NOT in those blocks: ideographic space and punctuation, fullwidth forms,
# CJK radicals, Bopomofo, Yi, Latin, Cyrillic, Georgian and an astral emoji. Each is a quarter token.
NON_CJK_SAMPLES = list("\u3000\u3002\uff01\uff21\uffa0\u2e80\u3100\ua000\u00e9\u0416\u10ff\U0001f600")


@pytest.mark.parametrize("ch", CJK_SAMPLES, ids=lambda c: f"U+{ord(c):04X}")
def test_u1_cjk_kana_hangul_one_token_each(ch: str) -> None:
    assert H.text(ch * 4) == 4


@pytest.mark.parametrize("ch", NON_CJK_SAMPLES, ids=lambda c: f"U+{ord(c):04X}")
def test_u2_other_code_points_quarter_token(ch: str) -> None:
    # Four of them make one token, whatever their UTF-8 or UTF-16 length.
    assert H.text(ch * 4) == 1
    assert H.text(ch * 5) == 2


def test_u2_ceil_of_other_over_four() -> None:
    assert [H.text("a" * n) for n in range(0, 10)] == [0, 1, 1, 1, 1, 2, 2, 2, 2, 3]


def test_u1_u2_spec_example_mixed_text() -> None:
    # The worked example (docs/context.md), step 2: 6 CJK + 7 other = 6 + ceil(7/4) = 8
    assert H.text("重构这个函数 please") == 8


def test_u1_u2_non_ascii_without_cjk_and_long_mixed() -> None:
    assert H.text("naïve café") == 3  # 10 code points, no CJK
    text = ("中文" * 1000) + ("abcd" * 1000)
    assert H.text(text) == 2000 + 1000
    assert heuristic_text_tokens(text) == H.text(text)


def test_u3_image_is_1600_whatever_its_size() -> None:
    small = ImagePart(data="AA==", mime_type="image/png")
    big = ImagePart(data="A" * 400_000, mime_type="image/png")
    msg = UserMessage(content=[TextPart("look"), small, big])
    assert H.message(msg) == 1 + 2 * IMAGE_TOKENS == 3201


def test_u4_tool_call_is_name_plus_json_arguments() -> None:
    args = '{"path": "ama_acp/config.py", "offset": 10}'
    msg = AssistantMessage(content=[ToolCallPart(id="call_1", name="read", arguments=args)])
    assert H.message(msg) == H.text("read" + args)


def test_u4_tool_result_text_and_images() -> None:
    msg = ToolResultMessage(
        tool_call_id="call_1",
        name="read",
        content=[TextPart("x" * 1000), ImagePart(data="AA==", mime_type="image/png")],
    )
    assert H.message(msg) == 250 + IMAGE_TOKENS


def test_u4_thinking_is_counted_like_text() -> None:
    msg = AssistantMessage(content=[ThinkingPart(text="t" * 40, signature="sig"), TextPart("y" * 8)])
    assert H.message(msg) == 10 + 2


class CountingEstimator(HeuristicEstimator):
    def __init__(self) -> None:
        self.calls = 0

    def message(self, m: Message) -> int:
        self.calls += 1
        return super().message(m)


def test_u5_each_message_estimated_once() -> None:
    counting = CountingEstimator()
    cache = MessageEstimates(counting)
    m = UserMessage(content=[TextPart("hello world")])
    assert cache.get(m) == cache.get(m) == 3
    assert counting.calls == 1
    # An equal but distinct object is a different message (identity, not equality).
    cache.get(UserMessage(content=[TextPart("hello world")]))
    assert counting.calls == 2


def test_u5_retain_drops_messages_that_left() -> None:
    cache = MessageEstimates(H)
    keep, drop = UserMessage(content=[TextPart("a")]), UserMessage(content=[TextPart("b")])
    cache.get(keep)
    cache.get(drop)
    cache.retain([keep])
    assert len(cache) == 1


def test_u6_make_estimator_defaults_to_heuristic() -> None:
    assert isinstance(make_estimator("heuristic"), HeuristicEstimator)
    assert isinstance(make_estimator("nonsense"), HeuristicEstimator)


def test_u6_heuristic_does_not_import_tiktoken() -> None:
    code = (
        "import sys, ama_acp.context.estimate as e, ama_acp.context.meter;"
        "e.make_estimator('heuristic').text('x');"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_u6_tiktoken_works_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tiktoken")

    def no_network(*_a, **_k):
        raise AssertionError("the tiktoken estimator tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(estimate, "_ENCODINGS", {})
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    est = TiktokenEstimator()
    assert est.available and est.name == "tiktoken"
    assert est.text("hello world") == 2
    assert est.text("") == 0
    # Special-token look-alikes are counted as text, not rejected.
    assert est.text("<|endoftext|>") > 1
    img = UserMessage(content=[ImagePart(data="AA==", mime_type="image/png")])
    assert est.message(img) == IMAGE_TOKENS


def test_u6_unavailable_encoding_falls_back_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(estimate, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="ama_acp.context.estimate"):
        a = TiktokenEstimator(encoding="no_such_encoding_offline")
        b = TiktokenEstimator(encoding="no_such_encoding_offline")
    assert not a.available and a.name == "heuristic"
    assert a.text("重构这个函数 please") == 8 == b.text("重构这个函数 please")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1


def test_u6_missing_tiktoken_package_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(estimate, "_warned", False)
    monkeypatch.setattr(estimate, "_ENCODINGS", {})
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError
    est = make_estimator("tiktoken")
    assert est.name == "heuristic"
    assert est.text("abcd" * 10) == 10
