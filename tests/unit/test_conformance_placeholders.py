"""`--model-env` values (conformance/core/placeholders.py): the four placeholders are replaced, everything else is the
value as given — a JSON value needs no escaping — and a mistyped placeholder is an error, never passed on."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_conformance.core.placeholders import PlaceholderError, expand
from tests.support.hypothesis_profiles import examples

VALUES = {
    "openai": "http://127.0.0.1:9/v1",
    "anthropic": "http://127.0.0.1:9",
    "url": "http://127.0.0.1:9",
    "port": "9",
}


def test_each_placeholder_is_replaced() -> None:
    assert expand("{openai}", VALUES) == "http://127.0.0.1:9/v1"
    assert expand("base={url}/x port={port} a={anthropic}", VALUES) == (
        "base=http://127.0.0.1:9/x port=9 a=http://127.0.0.1:9"
    )


def test_a_json_value_needs_no_escaping() -> None:
    template = '{"provider": {"baseURL": "{openai}", "headers": {}}, "models": [{"id": "m"}]}'
    assert json.loads(expand(template, VALUES)) == {
        "provider": {"baseURL": "http://127.0.0.1:9/v1", "headers": {}},
        "models": [{"id": "m"}],
    }
    assert expand("{", VALUES) == "{" and expand("}", VALUES) == "}" and expand("{}", VALUES) == "{}"


def test_the_older_doubled_braces_still_work() -> None:
    """Values written for str.format (literal braces doubled) read as before: `{{` never occurs in JSON."""
    assert expand('{{"baseURL": "{openai}"}}', VALUES) == '{"baseURL": "http://127.0.0.1:9/v1"}'


@pytest.mark.parametrize("template", ["{nope}", "{0}", "{url.x}", "{url[0]}", "a{opneai}b", "{{ {", "{{x}} {nope}"])
def test_a_mistyped_placeholder_is_an_error(template: str) -> None:
    with pytest.raises(PlaceholderError):
        expand(template, VALUES)


@given(st.text().filter(lambda t: "{" not in t))
@settings(max_examples=examples(200))
def test_a_value_without_braces_is_unchanged(text: str) -> None:
    assert expand(text, VALUES) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.sampled_from(["{openai}", "{url}/x", "{port}"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(json_values)
@settings(max_examples=examples(200))
def test_any_json_value_expands_to_the_same_json_with_the_placeholders_filled(value: object) -> None:
    """Every JSON document is taken as it is, its placeholders (inside strings) replaced — or, where a string of
    it happens to hold a bare word in braces, refused, never mangled."""
    template = json.dumps(value)
    if "{{" in template:  # the older syntax's marker (a string holding "{{"): read the old way
        return
    try:
        out = expand(template, VALUES)
    except PlaceholderError:
        return
    expected = template
    for name, val in VALUES.items():
        expected = expected.replace("{" + name + "}", val)
    assert out == expected
    json.loads(out)
