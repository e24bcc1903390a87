"""A small ACP conformance run against any agent: `python conformance/run.py [--prompt TEXT] -- AGENT CMD…`.

It drives the agent with ama's own client over stdio, validates every line the agent writes against the
pinned official schema (per method; the copy vendored in schema/v1/, read and hash-checked by
tests/support/acp_schema.py, never fetched), and checks the requirements below, citing the rule
ids that docs/rules.md defines: the ACP v1 agent requirements (R*) and the context-meter contract
(E*, D*, P*). It prints one line a check and exits 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ama_acp.client.connection import AgentProcess, ClientOptions  # noqa: E402
from ama_acp.client.handlers import RpcError  # noqa: E402
from tests.support.acp_schema import WireRecorder, load_validator  # noqa: E402


class Report:
    def __init__(self) -> None:
        self.results: list[tuple[str, bool, str]] = []

    def check(self, rid: str, ok: bool, what: str) -> None:
        self.results.append((rid, ok, what))
        print(f"{'PASS' if ok else 'FAIL'}  {rid:<6} {what}", flush=True)

    @property
    def failed(self) -> int:
        return sum(1 for _, ok, _ in self.results if not ok)


async def expect_error(conn: AgentProcess, method: str, params: Any, code: int) -> bool:
    try:
        await conn.request(method, params, timeout=10)
    except RpcError as exc:
        return exc.code == code
    return False


def kinds_of(conn: AgentProcess, sid: str) -> list[str]:
    return [u["sessionUpdate"] for u in conn.updates_for(sid)]


def is_parse_error(raw: str) -> bool:
    try:
        msg = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(msg, dict) or "id" not in msg or msg["id"] is not None:
        return False
    error = msg.get("error")
    return isinstance(error, dict) and error.get("code") == -32700


async def arrives(conn: AgentProcess, condition: Callable[[], bool], timeout: float = 10) -> bool:
    """Whether `condition` comes to hold within `timeout` s (re-checked as messages arrive): a deadline for
    something the agent must send, never a fixed pause."""
    try:
        await conn.wait_for(condition, timeout)
    except TimeoutError:
        return False
    return True


async def run(agent: list[str], prompt: str, cwd: str) -> int:
    report = Report()
    validator = load_validator()
    async with AgentProcess(agent, ClientOptions(permission="allow_once"), cwd=cwd) as conn:
        init = await conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=30)
        report.check("R36", init.get("protocolVersion") == 1, "initialize answers with version 1")
        newer = await conn.request("initialize", {"protocolVersion": 99}, timeout=30)
        report.check("R37", newer.get("protocolVersion") == 1, "a newer requested version gets the agent's latest")
        new = await conn.request("session/new", {"cwd": cwd, "mcpServers": []}, timeout=30)
        sid = new.get("sessionId", "")
        report.check("R53", bool(sid), "session/new returns a session id")
        other = await conn.request("session/new", {"cwd": cwd, "mcpServers": []}, timeout=30)
        report.check("R53", other.get("sessionId") not in ("", sid), "two sessions get two ids")
        opened = await arrives(conn, lambda: "usage_update" in kinds_of(conn, sid))
        report.check("E4", opened, "a usage_update follows session/new (after its response)")
        result = await conn.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}, timeout=120
        )
        stop = result.get("stopReason")
        report.check(
            "R103",
            stop in ("end_turn", "max_tokens", "max_turn_requests", "refusal"),
            f"the prompt ends with a stop reason ({stop})",
        )
        usage = [u for u in conn.updates_for(sid, "usage_update")]
        dupes = sum(1 for a, b in zip(usage, usage[1:], strict=False) if a == b)
        report.check("D1", dupes == 0, f"no consecutive identical usage_updates ({len(usage)} sent)")
        report.check("P1", all(u["used"] >= 0 and u["size"] > 0 for u in usage), "used ≥ 0 and size > 0")
        report.check("R17", await expect_error(conn, "session/no_such_method", {}, -32601), "unknown method → -32601")
        report.check("R17", await expect_error(conn, "session/new", {"mcpServers": []}, -32602), "missing cwd → -32602")
        mark = len(conn.transcript)
        await conn.send_raw('{"jsonrpc": "2.0", "id": 999, "method": ')
        answered = await arrives(
            conn, lambda: any(is_parse_error(e.raw) for e in conn.transcript[mark:] if e.direction == "in")
        )
        report.check("R17", answered, "a line that is not JSON → -32700 with id null")
        alive = await conn.request("initialize", {"protocolVersion": 1}, timeout=10)
        report.check("R17", alive.get("protocolVersion") == 1, "after a malformed line the agent keeps serving")
        await conn.notify("session/cancel", {"sessionId": "no-such-session"})
        report.check(
            "R114",
            (await conn.request("initialize", {"protocolVersion": 1}, timeout=10)) is not None,
            "cancel of an unknown session is ignored",
        )
    recorder = WireRecorder(validator)
    for entry in conn.transcript:
        if entry.direction == "out":
            try:
                recorder.sent(json.loads(entry.raw))
            except ValueError:
                pass  # our deliberately malformed line
        else:
            recorder.received(entry.raw)
    bad = recorder.violations
    report.check(
        "P3", not bad, "every message validates against the pinned schema" + (f": {bad[0][:300]}" if bad else "")
    )
    report.check("R4", not conn.violations_of("non_json_stdout"), "nothing but JSON-RPC on stdout")
    report.check("R7", conn.returncode == 0, f"stdin EOF ends the agent cleanly (exit {conn.returncode})")
    print(f"\n{len(report.results) - report.failed} passed, {report.failed} failed")
    return 1 if report.failed else 0


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.stderr.write(__doc__ or "")
        return 2
    i = argv.index("--")
    p = argparse.ArgumentParser(prog="conformance/run.py")
    p.add_argument("--prompt", default="Say hello in one short sentence.")
    p.add_argument("--cwd", default=str(Path.cwd()))
    args = p.parse_args(argv[:i])
    return anyio.run(run, argv[i + 1 :], args.prompt, str(Path(args.cwd).resolve()))


if __name__ == "__main__":
    raise SystemExit(main())
