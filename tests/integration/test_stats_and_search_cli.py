"""`ama stats` and `ama sessions search` (issue 42: the seed has both), through the real command on sessions a real
`ama -p` stored: the stored figures are the ones the session reported, read without a model; the search finds
what the person and the model said, in the sessions of one project, and nothing else."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.test_cli import ama_cli
from tests.support.harness import Ama


def _prompt(ama: Ama, text: str) -> dict[str, Any]:
    """The JSON `ama -p` prints (parsed JSON: any shape until the asserts look)."""
    out = ama_cli(ama, "-p", text, "--output-format", "json", "--data-dir", str(ama.data))
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_ama_stats_reads_the_stored_figures_the_session_reported(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    live = _prompt(ama, "fix it")
    sid = live["sessionId"]
    # A model that is not available now changes nothing: the figures are read, no request is sent.
    ama.config.write_text('model = "openai/gpt-4.1"\n')
    out = ama_cli(ama, "stats", str(sid), "--json", "--data-dir", str(ama.data), env={"OPENAI_API_KEY": ""})
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["sessionId"] == sid and stats["model"] == "scripted/demo"
    assert stats["cost"] == live["cost"]
    usage, billed = live["usage"], stats["billed"]
    assert (billed["input"], billed["output"], billed["total"]) == (
        usage["inputTokens"],
        usage["outputTokens"],
        usage["totalTokens"],
    )
    assert stats["cacheHitRate"] == billed["cacheReadShare"]
    context = live["context"]
    assert (stats["contextTokens"], stats["contextWindow"], stats["contextPercent"]) == (
        context["tokens"],
        context["window"],
        context["percent"],
    )
    assert stats["context"]["source"] == "usage"
    # Without an id: the newest session of the current directory, printed for a person.
    text = ama_cli(ama, "stats", "--data-dir", str(ama.data))
    assert text.returncode == 0 and sid in text.stdout and "contextPercent" in text.stdout
    assert f"{context['tokens']:,}" in text.stdout
    missing = ama_cli(ama, "stats", "ses_000000000000000000000000", "--data-dir", str(ama.data))
    assert missing.returncode == 1 and "no session" in missing.stderr
    elsewhere = ama_cli(ama, "stats", "--data-dir", str(ama.data), cwd=tmp_path)
    assert elsewhere.returncode == 1 and "no stored session in this directory" in elsewhere.stderr


def test_sessions_search_finds_what_was_said_in_one_projects_sessions(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    first = _prompt(ama, "fix it")["sessionId"]
    second = _prompt(ama, "Zebra crossing question")["sessionId"]
    data = ("--data-dir", str(ama.data))

    def search(*args: str) -> tuple[int, list[dict[str, Any]]]:
        out = ama_cli(ama, "sessions", "search", *args, "--json", *data)
        return out.returncode, json.loads(out.stdout)

    rc, hits = search("zebra")  # the person's words, case-folded; the title holds them too
    assert rc == 0 and [h["sessionId"] for h in hits] == [second]
    assert hits[0]["titleMatches"] is True and hits[0]["messageMatches"] == 1
    assert hits[0]["excerpts"] == [{"message": 0, "role": "user", "excerpt": "Zebra crossing question"}]
    rc, hits = search("SUBTRACTS INSTEAD")  # the model's words
    assert rc == 0 and first in [h["sessionId"] for h in hits]
    roles = {e["role"] for h in hits for e in h["excerpts"]}
    assert roles == {"assistant"}
    rc, hits = search("zebra", "--cwd", str(tmp_path))  # another project's sessions only
    assert rc == 1 and hits == []
    text = ama_cli(ama, "sessions", "search", "zebra", *data)
    assert text.returncode == 0 and second in text.stdout and "[user] Zebra crossing question" in text.stdout
    nothing = ama_cli(ama, "sessions", "search", "no such words", *data)
    assert nothing.returncode == 1 and "no session holds" in nothing.stdout
    too_long = ama_cli(ama, "sessions", "search", "x" * 201, *data)
    assert too_long.returncode == 2 and "1 to 200 characters" in too_long.stderr
