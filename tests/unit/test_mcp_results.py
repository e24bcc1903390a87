"""tools/call results (JSON) → McpCallResult: text, images, resources, errors; anything else read safely."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.mcp.results import McpContent, map_result
from tests.support.hypothesis_profiles import examples

PNG = "iVBORw0KGgo="


def test_text_image_and_resources_are_mapped() -> None:
    result = map_result(
        {
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "body"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
                {"type": "resource_link", "uri": "file:///c", "name": "c"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            ],
            "isError": False,
        }
    )
    assert result.is_error is False
    assert result.content[0] == McpContent(kind="text", text="hello")
    assert result.content[1] == McpContent(kind="image", data=PNG, mime_type="image/png")
    assert result.content[2] == McpContent(kind="resource", text="body", mime_type="text/plain", uri="file:///a.txt")
    assert result.content[3].kind == "resource" and "3 bytes" in result.content[3].text
    assert result.content[4].uri == "file:///c"
    assert result.content[5].kind == "text" and "audio" in result.content[5].text
    text = result.text
    assert text.startswith("hello\n[image]\n[resource file:///a.txt]\nbody")
    assert PNG not in text


def test_is_error_only_when_true() -> None:
    assert map_result({"content": [], "isError": True}).is_error is True
    assert map_result({"content": [], "isError": "true"}).is_error is False


def test_structured_content_alone_is_shown_as_json() -> None:
    assert map_result({"content": [], "structuredContent": {"a": 1}}).text == '{"a":1}'


def test_broken_items_become_text_saying_so() -> None:
    result = map_result(
        {
            "content": [
                {"type": "image", "data": "%%% not base64", "mimeType": "image/png"},
                {"type": "image", "data": PNG, "mimeType": "text/html"},
                {"type": "video"},
                7,
                {"type": "resource"},
            ]
        }
    )
    assert all(item.kind == "text" for item in result.content)
    assert "not base64" in result.content[0].text
    assert "unknown type 'video'" in result.content[2].text


def test_not_an_object() -> None:
    result = map_result(["x"])
    assert result.is_error and "not an object" in result.text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
content_item = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "audio", "resource", "resource_link", "other"]) | json_values},
    optional={
        "text": json_values,
        "data": st.just(PNG) | json_values,
        "mimeType": st.sampled_from(["image/png", "text/plain"]) | json_values,
        "resource": json_values
        | st.fixed_dictionaries({}, optional={"uri": json_values, "text": json_values, "blob": json_values}),
        "uri": json_values,
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.fixed_dictionaries(
        {}, optional={"content": st.lists(content_item | json_values, max_size=6) | json_values, "isError": json_values}
    )
    | json_values
)
def test_any_json_maps_without_an_exception(raw: Any) -> None:
    result = map_result(raw)
    assert isinstance(result.text, str)
    for item in result.content:
        if item.kind == "image":
            assert item.data and item.mime_type and item.mime_type.startswith("image/")
