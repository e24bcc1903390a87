"""One run from start to report: the scripted model (when asked for), the groups, the verdicts, the output."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio

from ama_acp.client.confine import unsandboxed
from ama_acp.textsafe import one_line
from ama_conformance.core.config import RunConfig
from ama_conformance.core.placeholders import PlaceholderError, expand
from ama_conformance.core.report import Verdict, as_json, outcomes, startup_banner, text, verdict
from ama_conformance.core.runner import STARTUP, RunRecord
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS
from ama_conformance.groups.base import Group, ModelView
from ama_conformance.groups.catalog import GROUPS
from ama_conformance.schema.validate import SchemaUnavailable

USAGE_ERROR = 2


@contextlib.contextmanager
def _model(config: RunConfig) -> Iterator[tuple[dict[str, str], ModelView | None]]:
    """The agent's environment, and the scripted model it is pointed at (when --model-env names one)."""
    if not config.uses_model:
        yield dict(config.env), None
        return
    from ama_conformance.servers.model import ScriptedModel

    try:
        server = ScriptedModel(port=config.model_port or 0).start()
    except OSError as exc:
        raise ValueError(f"cannot serve the scripted model on port {config.model_port}: {exc.strerror or exc}") from exc
    with contextlib.closing(server) as model:
        values = model.placeholders()
        env = dict(config.env)
        for name, template in config.model_env.items():
            try:
                env[name] = expand(template, values)
            except PlaceholderError as exc:
                raise ValueError(f"--model-env {name}={template!r}: {exc} (known: {sorted(values)})") from exc
        config.turns.model_requests = lambda: len(model.requests)  # a turn whose model got a request is under way
        yield env, ModelView(lambda: list(model.requests))


def execute(config: RunConfig, report_json: str | None, strict: bool = False) -> int:
    from ama_conformance.core import runner

    try:
        chosen = runner.selected(GROUPS, config.select)
        with _model(config) as (env, model):
            record = anyio.run(runner.run, config, env, model)
    except (ValueError, SchemaUnavailable) as exc:
        sys.stderr.write(f"ama conformance: {one_line(str(exc))}\n")
        return USAGE_ERROR
    verdicts = _report(config, record, chosen, report_json)
    errors = [g.suite_error for g in record.groups if g.suite_error]
    if errors:  # the verdict cannot be trusted: say so, and exit as for any other failure to run the suite
        sys.stderr.write(
            "ama conformance: the suite itself failed (a bug, not the agent's):\n  "
            + "\n  ".join(one_line(e) for e in errors)
            + "\n"
        )
        return USAGE_ERROR
    if config.startup.exited:  # the command could not run: like a command that is not found, not a verdict
        return USAGE_ERROR
    return max(v.exit_code(strict) for v in verdicts)  # NO VIOLATION FOUND exits 0 unless --strict


def _report(config: RunConfig, record: RunRecord, chosen: list[Group], report_json: str | None) -> list[Verdict]:
    """Write the text report (and the JSON one when asked for); the verdicts, one a profile."""
    ran = {rid for g in chosen for rid in g.ids} | set(TRANSCRIPT_IDS) if config.select else None
    results = outcomes(record, config.profiles, ran)
    # An agent whose command exited before answering the start-up probe's initialize could not start: that is the
    # verdict, not "no violation found" (a silent one, or one refusing initialize, is judged: R36). One that dies
    # later, after groups ran, keeps the verdict of what they found.
    probe_failed = any(g.name == STARTUP and g.stopped for g in record.groups)
    could_not_start = record.startup if config.startup.exited and probe_failed else None
    verdicts = [verdict(p, results, could_not_start) for p in config.profiles]
    banner = startup_banner(record)
    sys.stdout.write(text(results, verdicts, record.seconds, partial=bool(config.select)))
    if record.startup is not None:
        sys.stdout.write(startup_text(config, banner))
    unconfined = unsandboxed(config.sandbox)
    if unconfined and _asked_for_terminals(record):  # said once for the run, not per command
        sys.stdout.write(f"\nThe commands the agent asked to run (terminal/create) were not sandboxed: {unconfined}.\n")
    if report_json:
        data = as_json(record, results, verdicts, config.command)
        if record.startup is not None:
            data["startup"] = {
                "reason": record.startup,
                "exited": config.startup.exited,
                "returncode": config.startup.returncode,
                "banner": banner,
            }
        data["sandbox"] = {"mode": config.sandbox.mode, "network": config.sandbox.network, "unsandboxed": unconfined}
        Path(report_json).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    return verdicts


def _asked_for_terminals(record: RunRecord) -> bool:
    """Whether any agent of the run sent a terminal/create request (the record's transcripts say)."""
    return any(
        entry["dir"] == "in" and '"terminal/create"' in entry["line"]
        for group in record.groups
        for agent in group.agents
        for entry in agent.transcript
    )


STDERR_LINES = 20  # the lines of the agent's stderr a start-up failure shows


def startup_text(config: RunConfig, banner: list[str] | None = None) -> str:
    """Why no group ran: the reason, the agent's exit code, what it wrote on stdout that is not JSON before it
    could answer (`banner`: a banner, or its error said there), and the last lines of its stderr (each made one
    safe line: the agent wrote them, with whatever controls it liked). The JSON report keeps the whole tail."""
    watch = config.startup
    code = watch.returncode
    lines = [
        "",
        f"The agent could not be initialized: {watch.failure}.",
        "No further group ran: their requirements are NOT_TESTED for this one reason.",
        f"exit code: {code if code is not None else 'unknown'}"
        + ("" if watch.exited or code is None else " (it was still running when the suite closed it)"),
    ]
    if banner:
        many = "s" if len(banner) != 1 else ""
        lines.append(f"its stdout before any answer ({len(banner)} line{many} that are not JSON):")
        lines += ["  | " + one_line(line)[:500] for line in banner]
    tail = watch.stderr.splitlines()[-STDERR_LINES:]
    if tail:
        lines.append(f"its stderr (last {len(tail)} line{'s' if len(tail) != 1 else ''}):")
        lines += ["  | " + one_line(line)[:500] for line in tail]
    else:
        lines.append("its stderr: empty")
    return "\n".join(one_line(line) for line in lines) + "\n"
