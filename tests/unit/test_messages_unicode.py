"""Text in the conversation is valid Unicode, whatever the OS or the model hands over (hypothesis)."""

from __future__ import annotations

import os

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import ToolCallPart, valid_unicode
from tests.support.hypothesis_profiles import examples

FUZZ = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(300))


@settings(max_examples=FUZZ, deadline=None)
@given(st.text())  # hypothesis's text includes lone surrogates
def test_valid_unicode_always_encodes_and_leaves_valid_text_alone(text):
    out = valid_unicode(text)
    msgspec.json.encode(out)  # never raises
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert "\ufffd" in out
    else:
        assert out is text


def test_an_undecodable_byte_in_a_file_name_becomes_one_replacement_character():
    assert valid_unicode(os.fsdecode(b"bad-\xff.txt")) == "bad-\ufffd.txt"


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ('{"path": "\\ud800"}', "not valid Unicode"),
        ('{"path": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
        ("[1]", "must be a JSON object"),
        ("{not json", "Expecting property name"),
    ],
)
def test_arguments_that_cannot_be_written_back_are_invalid(arguments, problem):
    with pytest.raises(ValueError, match=problem):
        ToolCallPart("c1", "read_file", arguments).parsed_arguments()


def test_a_valid_surrogate_pair_is_text():
    assert ToolCallPart("c1", "x", '{"s": "\\ud83d\\ude00"}').parsed_arguments() == {"s": "\U0001f600"}
