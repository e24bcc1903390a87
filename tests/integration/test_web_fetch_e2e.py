"""web_fetch through real pipes: the person is asked in Manual mode (kind `fetch`, the whole URL in the title),
the model gets the page with its title and final URL, `[web] allow_hosts` is read from the config, and a
cancel during a slow fetch ends the call and the turn (features together: cancel)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from tests.integration.test_cancel_e2e import KEY, dangling, open_calls, prompt, start
from tests.support.harness import Ama, local_config, permission_asks, run_ama
from tests.support.json_values import as_object, as_str
from tests.support.llm_server import LLMServer
from tests.support.web_server import WebServer

pytestmark = pytest.mark.anyio

PAGE = b"""<!doctype html><html><head><title>Release notes</title><script>var LEAK = 1;</script></head>
<body><nav>NAV-LINKS</nav><main><h1>Version 2</h1><p>Faster <b>builds</b>.</p></main></body></html>"""


def configure(ama: Ama, llm_url: str, allow: list[str], rules: str = "") -> None:
    hosts = ", ".join(f'"{h}"' for h in allow)
    ama.config.write_text(local_config(llm_url, tail=f"[web]\nallow_hosts = [{hosts}]\n{rules}"))


def fetch_call(url: str, cid: str = "f1") -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": "web_fetch", "arguments": {"url": url}}]}


def tool_message(body: dict[str, Any], call_id: str) -> str:
    return as_str(
        next(m["content"] for m in body["messages"] if m.get("role") == "tool" and m["tool_call_id"] == call_id)
    )


@pytest.mark.parametrize(("mode", "asks"), [("manual", True), ("read_only", True), ("full_access", False)])
async def test_a_fetch_asks_in_manual_mode_and_the_model_gets_the_page(tmp_path, mode, asks):
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web:
        web.route("/notes", body=PAGE)
        url = web.url("/notes?from=ama")
        configure(ama, llm.openai_url, ["127.0.0.1"])
        llm.enqueue(fetch_call(url), {"text": "read it"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, mode)
            result = await conn.prompt(sid, "read the release notes", timeout=20)
            assert result["stopReason"] == "end_turn"
            asked = [p for p, _ in permission_asks(conn)]
            if asks:
                assert len(asked) == 1
                call = asked[0]["toolCall"]
                assert call["kind"] == "fetch" and call["title"] == f"Fetch {url}"
                assert "fetches" in " ".join(o["name"] for o in asked[0]["options"])
            else:
                assert asked == []
            shown = [u for u in conn.updates_for(sid, "tool_call") if u["toolCallId"]]
            assert shown and shown[0]["kind"] == "fetch"
            sent = tool_message(llm.requests[-1].body, "f1")
            assert sent.startswith(f"URL: {url}\nTitle: Release notes\n")
            assert "# Version 2" in sent and "**builds**" in sent
            assert "LEAK" not in sent and "NAV-LINKS" not in sent
            assert web.hits == ["/notes?from=ama"]


async def test_without_allow_hosts_loopback_is_refused_after_the_person_allowed_it(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web:
        web.route("/", body=PAGE)
        configure(ama, llm.openai_url, [])
        llm.enqueue(fetch_call(web.url("/")), {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            final = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
            assert len(final) == 1
            sent = tool_message(llm.requests[-1].body, "f1")
            assert "127.0.0.1 is loopback" in sent and "allow_hosts" in sent
            assert web.hits == []


async def test_a_rejected_fetch_sends_nothing(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web:
        web.route("/", body=PAGE)
        configure(ama, llm.openai_url, ["127.0.0.1"])
        llm.enqueue(fetch_call(web.url("/?secret=42")), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert web.hits == []
            assert "rejected" in tool_message(llm.requests[-1].body, "f1")


async def test_cancel_during_a_slow_fetch_ends_the_call_and_the_turn(tmp_path):
    ama = Ama(tmp_path)
    hold = threading.Event()
    with LLMServer() as llm, WebServer() as web:
        web.route("/slow", hold=hold, body=PAGE)
        configure(ama, llm.openai_url, ["127.0.0.1"])
        llm.enqueue(fetch_call(web.url("/slow")))
        try:
            async with run_ama(ama, env=KEY) as conn:
                sid = await start(conn, ama)
                pending = await prompt(conn, sid)
                await conn.wait_for(lambda: bool(web.hits), timeout=15)
                started = anyio.current_time()
                await conn.cancel(sid)
                result = as_object(await pending.wait(timeout=10))
                assert result["stopReason"] == "cancelled"
                assert anyio.current_time() - started < 5  # not the fetch's own 30 s
                assert open_calls(conn, sid) == []
                final = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
                assert final and final[-1]["toolCallId"]
                # The session goes on, with every tool call answered in the next request.
                llm.enqueue({"text": "next turn works"})
                again = await conn.prompt(sid, "again", timeout=15)
                assert again["stopReason"] == "end_turn"
                assert dangling(llm.requests[-1].body) == []
        finally:
            hold.set()


async def test_always_allow_for_a_fetch_covers_its_host_and_port_only(tmp_path):
    """An "always allow" on a fetch is remembered for that origin, host and port: a fetch of another host, or of
    another port of the same host, asks again; one of the same origin does not (a single click must not open
    every address to a model that may be carrying out what it read)."""
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web, WebServer() as second:
        web.route("/a", body=PAGE)
        second.route("/a", body=PAGE)
        configure(ama, llm.openai_url, ["127.0.0.1", "localhost"])
        first, other, again = web.url("/a?1"), web.url("/a?2", host="localhost"), web.url("/a?3")
        port = second.url("/a?4")
        calls = [fetch_call(first, "f1"), fetch_call(other, "f2"), fetch_call(again, "f3"), fetch_call(port, "f4")]
        llm.enqueue(*calls, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="allow_always")) as conn:
            sid = await start(conn, ama, "manual")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            asked = [p["toolCall"]["toolCallId"] for p, _ in permission_asks(conn)]
            assert asked == ["f1", "f2", "f4"], asked  # f3: the same origin as f1, already always allowed
            names = [
                o["name"] for p, _ in permission_asks(conn) for o in p["options"] if o["optionId"] == "allow_always"
            ]
            assert names == [
                f"Always allow fetches from 127.0.0.1:{web.port} in this session",
                f"Always allow fetches from localhost:{web.port} in this session",
                f"Always allow fetches from 127.0.0.1:{second.port} in this session",
            ]
            assert web.hits == ["/a?1", "/a?2", "/a?3"] and second.hits == ["/a?4"]


async def test_a_page_nested_50000_deep_costs_no_more_than_its_call(tmp_path):
    """Issue 39 item 2: 850 KB of 50,000 nested list items, through a real `ama --mode acp`. It is converted in a
    process of its own (a native crash there would end only that child), the model is told so, and the process
    answers the next prompt."""
    ama = Ama(tmp_path)
    page = ("<html><body>" + "<ol><li>item" * 50_000 + "</ol>" * 50_000 + "</body></html>").encode()
    with LLMServer() as llm, WebServer() as web:
        web.route("/deep", body=page)
        configure(ama, llm.openai_url, ["127.0.0.1"])
        llm.enqueue(fetch_call(web.url("/deep")), {"text": "read it"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "read the deep page", timeout=60))["stopReason"] == "end_turn"
            sent = tool_message(llm.requests[-1].body, "f1")
            assert "more than 1,000 levels deep: it was turned into Markdown in a separate process" in sent
            assert "1. item\n   1. item\n" in sent
            llm.enqueue({"text": "still here"})
            assert (await conn.prompt(sid, "and now?", timeout=20))["stopReason"] == "end_turn"
            assert not conn.exited


def _redirecting(web: WebServer, there: WebServer) -> str:
    """`/go` on `web` redirects to `/there` on `there`: another port of 127.0.0.1, so another origin."""
    web.route("/go", status=302, headers={"Location": there.url("/there")})
    there.route("/there", body=PAGE)
    return web.url("/go")


async def test_a_redirect_to_another_origin_is_asked_about_and_a_rejection_stops_it(tmp_path):
    """Issue 39 item 10, through a real `ama --mode acp`: the first URL is allowed by a rule for its host and port;
    the redirect to another port is asked about as a fetch of its own, and the person's "Reject" leaves it
    unfetched."""
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web, WebServer() as there:
        url = _redirecting(web, there)
        rules = f'[permissions]\nallow = ["web_fetch(127.0.0.1:{web.port})"]\n'
        configure(ama, llm.openai_url, ["127.0.0.1"], rules)
        llm.enqueue(fetch_call(url), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once"), process=True) as conn:
            sid = await start(conn, ama, "manual")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            asked = [p["toolCall"] for p, _ in permission_asks(conn)]
            assert len(asked) == 1 and asked[0]["toolCallId"] == "f1" and asked[0]["kind"] == "fetch"
            assert asked[0]["title"] == f"Fetch {there.url('/there')} (redirected from {url})"
            assert web.hits == ["/go"] and there.hits == []
            sent = tool_message(llm.requests[-1].body, "f1")
            assert "another site, which was not fetched" in sent and "rejected" in sent


async def test_an_allowed_redirect_is_fetched_and_its_always_answer_remembered(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web, WebServer() as there:
        url = _redirecting(web, there)
        configure(ama, llm.openai_url, ["127.0.0.1"])
        llm.enqueue(fetch_call(url, "f1"), fetch_call(url, "f2"), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="allow_always"), process=True) as conn:
            sid = await start(conn, ama, "manual")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            asks = permission_asks(conn)
            assert [p["toolCall"]["toolCallId"] for p, _ in asks] == ["f1", "f1"]  # f2: both origins remembered
            names = [o["name"] for p, _ in asks for o in p["options"] if o["optionId"] == "allow_always"]
            assert names[1] == f"Always allow fetches from 127.0.0.1:{there.port} in this session"
            running = [
                u
                for u in conn.updates_for(sid, "tool_call_update")
                if (u["toolCallId"], u.get("status")) == ("f1", "in_progress")
            ]
            assert len(running) == 2  # once asked about the redirect (pending), the call is shown running again
            assert there.hits == ["/there", "/there"]
            sent = tool_message(llm.requests[-1].body, "f2")
            assert sent.startswith(f"URL: {there.url('/there')}\nRedirected from: {url}\n")


async def test_a_deny_rule_stops_a_redirect_even_in_full_access(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web, WebServer() as there:
        url = _redirecting(web, there)
        configure(ama, llm.openai_url, ["127.0.0.1"], f'[permissions]\ndeny = ["web_fetch(127.0.0.1:{there.port})"]\n')
        llm.enqueue(fetch_call(url), {"text": "ok"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            assert permission_asks(conn) == []
            assert web.hits == ["/go"] and there.hits == []
            sent = tool_message(llm.requests[-1].body, "f1")
            assert f"web_fetch(127.0.0.1:{there.port})" in sent


async def test_a_long_url_is_cut_in_the_title_with_a_marker(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm, WebServer() as web:
        web.route("/a", body=PAGE)
        url = web.url("/a?q=" + "x" * 3_000)
        configure(ama, llm.openai_url, ["127.0.0.1"])
        llm.enqueue(fetch_call(url), {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, "manual")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            title = permission_asks(conn)[0][0]["toolCall"]["title"]
            kept = len(title) - len("Fetch ") - len("… [+0,000 chars]")
            assert title == f"Fetch {url[:kept]}… [+{len(url) - kept:,} chars]" and len(title) <= 2_006
