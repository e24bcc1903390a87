"""Script files for the scripted model are input like any other: decoded once, at load, into typed values."""

from __future__ import annotations

import anyio
import pytest

from ama_acp.conversation.messages import TextPart, Usage, UserMessage
from ama_acp.providers import base as pb
from ama_acp.providers.scripted import (
    CACHE_MINIMUM,
    CACHE_STEP,
    Reply,
    Script,
    ScriptedProvider,
    ScriptError,
    load_script,
)


def test_a_script_with_known_kinds_loads(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[reply]]\nstop = "max_tokens"\ntext = "x"\n[[reply]]\nfailure = { kind = "rate_limit" }\n')
    script = load_script(path)
    assert script.reply[0].stop == "max_tokens"
    assert script.reply[1].failure is not None and script.reply[1].failure.kind == "rate_limit"


@pytest.mark.parametrize(
    "body",
    [
        '[[reply]]\nstop = "whenever"\n',
        '[[reply]]\nfailure = { kind = "meltdown" }\n',
        "[[reply]]\nstop = 3\n",
        '[[reply]]\nusage = "plenty"\n',
    ],
    ids=["unknown-stop", "unknown-failure-kind", "stop-not-a-string", "unknown-usage-word"],
)
def test_a_stop_or_failure_kind_ama_does_not_know_is_a_script_error_at_load(tmp_path, body):
    path = tmp_path / "s.toml"
    path.write_text(body)
    with pytest.raises(ScriptError, match="script"):
        load_script(path)


def _usages(reply: Reply, sizes: list[int]) -> list[Usage]:
    """The usage the scripted model reports for requests whose estimates are `sizes`, one after another."""
    estimates = iter(sizes)
    provider = ScriptedProvider(Script(reply=[reply] * len(sizes)), lambda request: next(estimates))
    request = pb.ModelRequest(model="s", system="", messages=[UserMessage(content=[TextPart(text="hi")])])

    async def main() -> list[Usage]:
        out: list[Usage] = []
        for _ in sizes:
            async for event in provider.stream(request):
                if isinstance(event, pb.Finished):
                    assert event.usage is not None
                    out.append(event.usage)
        return out

    return anyio.run(main)


def test_cached_usage_bills_the_shared_prefix_as_cache_reads_with_the_same_total():
    first, second, small = _usages(Reply(text="ok", usage="cached"), [3000, 3500, 900])
    assert (first.input, first.cache_read) == (3000, 0)  # nothing cached before the first request
    read = 3000 // CACHE_STEP * CACHE_STEP
    assert (second.input, second.cache_read, second.cache_write) == (3500 - read, read, 0)
    assert small.cache_read == 0 and small.input == 900  # below the cache's minimum
    assert CACHE_MINIMUM > 900


def test_auto_usage_reports_no_cache_figures():
    first, second = _usages(Reply(text="ok"), [3000, 3500])
    assert second.input == 3500 and second.cache_read is None
