"""web_fetch and deep pages (issue 39 item 2): the nesting estimate (tools/web/nesting.py) errs upwards and takes
time linear in the page, whatever it holds; a page nested past the limit is converted in a child process
(tools/web/isolated.py), and a child that crashes costs only the call."""

from __future__ import annotations

import os
import sys
import time

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.tools.web import isolated
from ama_acp.tools.web.nesting import NESTING_LIMIT, nesting
from ama_acp.tools.web.page import to_page

URL = "http://127.0.0.1/deep"


@pytest.mark.parametrize(
    ("page", "depth"),
    [
        ("<div><div><div>x</div></div></div>", 3),
        ("<ul>" + "<li>x" * 5_000 + "</ul>", 2),  # each <li> closes the one before
        ("<ul><li><ul><li><ul><li>", 6),  # a list in an item does not close it
        ("<p>a<p>b<div>c</div>", 1),  # a block closes the paragraph
        ("<table>" + "<tr><td>x" * 5_000 + "</table>", 3),
        ("<dl>" + "<dt>a<dd>b" * 100 + "</dl>", 2),
        ("<select>" + "<option>a" * 100, 2),
        ("<br><img src=x><hr><input>", 0),
        ("<div/>" * 20, 20),  # HTML has no self-closing <div>
        ("<b></i></i></i>x", 1),  # an end tag closes only what is open under its name
        ("<script>" + "<div>" * 5_000 + "</script><b>", 1),
        ("<style>a < b { }" + "<p>" * 100 + "</style><i>", 1),
        ("<!--" + "<div>" * 30 + "-->", 30),  # counted: erring upwards costs only a child process
        ("<a title='<div><div>'>", 3),
        ("<DIV><Div><div>", 3),
        ("<ol><li>item" * 50_000, 100_000),  # the page of issue 39 item 2
    ],
)
def test_the_estimate(page, depth):
    assert nesting(page).depth == depth


_pieces = st.sampled_from(
    ["<div>", "</div>", "<li>", "</li>", "<ul>", "<p>", "<td>", "<tr>", "<table>", "<b>", "</b>", "<script>",
     "</script>", "<style>", "<!--", "-->", "<", "</", "<a", "<a<a", "/>", ">", "x", " ", "<br>", "<dt>", "<dd>",
     "<option>", "<select>", "</p>", "<scriptx>"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(unit=st.lists(_pieces, min_size=1, max_size=8).map("".join), wrap=st.integers(0, 40))
def test_the_scan_is_linear_and_errs_upwards(unit, wrap):
    """Whatever a page repeats, the pass costs at most a few steps a character (each tag read once, each element
    pushed once and popped at most once), and elements wrapped around it count in full."""
    page = "<div>" * wrap + unit * 400
    found = nesting(page)
    assert found.steps <= 3 * len(page)
    assert found.depth >= wrap


def test_a_hostile_page_of_the_largest_size_is_scanned_in_about_a_second():
    """The worst of the shapes above at web_fetch's 5 MB cap: bounded, well inside the fetch's 30 s."""
    for unit in ("<li>", "<p>", "<b>", "<a<a", "</x>", "<p><div>", "<script>", "<"):
        page = unit * (5_000_000 // len(unit))
        started = time.perf_counter()
        assert nesting(page).steps <= 3 * len(page)
        assert time.perf_counter() - started < 10  # ~1.5 s on a loaded 2-core machine; linear, not quadratic


def test_a_deep_page_is_converted_in_a_child_process_and_said_so():
    page = "<html><body>" + "<ol><li>item" * 2_000 + "</body></html>"
    result = anyio.run(to_page, page, "html", URL, False)
    assert result.converted and result.note is not None and "separate process" in result.note
    assert result.text.startswith("1. item\n   1. item\n")


def test_a_shallow_page_is_converted_here():
    result = anyio.run(to_page, "<ul>" + "<li>x" * (NESTING_LIMIT + 10) + "</ul>", "html", URL, False)
    assert result.note is None and result.text.startswith("- x\n- x\n")


@pytest.mark.parametrize(
    ("child", "said"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "the converter crashed (SIGSEGV)"),
        ("import sys; sys.stdin.read(); raise SystemExit('stack overflow in the parser')", "stack overflow"),
    ],
)
def test_a_child_that_crashes_costs_only_the_call(monkeypatch, child, said):
    """A real child process, killed by a real signal: the page comes back as its source, with the reason; this
    process (the test's) goes on."""
    monkeypatch.setattr(isolated, "command", lambda url: [sys.executable, "-c", child])
    page = "<html><title>Deep</title><body>" + "<div>" * (NESTING_LIMIT + 1) + "x"
    result = anyio.run(to_page, page, "html", URL, False)
    assert not result.converted and result.text == page and result.title == "Deep"
    assert result.note is not None and said in result.note and "its HTML follows" in result.note


def test_a_child_that_dies_before_reading_a_big_page_costs_only_the_call(monkeypatch):
    child = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    monkeypatch.setattr(isolated, "command", lambda url: [sys.executable, "-c", child])
    page = "<div>" * 1_000_000  # 5 MB: more than a pipe holds, so the write meets a closed pipe
    result = anyio.run(to_page, page, "html", URL, False)
    assert not result.converted and result.note is not None and "SIGSEGV" in result.note


def test_a_cancel_kills_the_child(monkeypatch, tmp_path):
    told = tmp_path / "pid"
    os.mkfifo(told)  # the child says its pid through a real FIFO once it runs
    child = f"import os, time; open({str(told)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    monkeypatch.setattr(isolated, "command", lambda url: [sys.executable, "-c", child])

    async def main() -> int:
        page = "<div>" * (NESTING_LIMIT + 1)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(to_page, page, "html", URL, False)
                with anyio.fail_after(20):
                    pid = int(await anyio.to_thread.run_sync(told.read_text))
                scope.cancel()
        return pid

    pid = anyio.run(main)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left to sleep its minute
        os.kill(pid, 0)
