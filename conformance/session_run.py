"""One run from start to report: the scripted model (when asked for), the groups, the verdicts, the output."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio

from ama_acp.textsafe import one_line
from conformance.config import RunConfig
from conformance.groups.base import GROUPS, ModelView
from conformance.report import as_json, outcomes, text, verdict
from conformance.schema import SchemaUnavailable
from conformance.wire_checks import TRANSCRIPT_IDS

USAGE_ERROR = 2


@contextlib.contextmanager
def _model(config: RunConfig) -> Iterator[tuple[dict[str, str], ModelView | None]]:
    """The agent's environment, and the scripted model it is pointed at (when --model-env names one)."""
    if not config.uses_model:
        yield dict(config.env), None
        return
    from conformance.model_server import ScriptedModel

    try:
        server = ScriptedModel(port=config.model_port or 0).start()
    except OSError as exc:
        raise ValueError(f"cannot serve the scripted model on port {config.model_port}: {exc.strerror or exc}") from exc
    with contextlib.closing(server) as model:
        values = model.placeholders()
        env = dict(config.env)
        for name, template in config.model_env.items():
            try:
                env[name] = template.format_map(values)
            except (KeyError, ValueError, IndexError, AttributeError, TypeError) as exc:
                raise ValueError(
                    f"--model-env {name}={template!r}: unknown placeholder {exc} (known: {sorted(values)})"
                ) from exc
        yield env, ModelView(lambda: list(model.requests))


def execute(config: RunConfig, report_json: str | None) -> int:
    from conformance import runner

    try:
        chosen = runner.selected(GROUPS, config.select)
        with _model(config) as (env, model):
            record = anyio.run(runner.run, config, env, model)
    except (ValueError, SchemaUnavailable) as exc:
        sys.stderr.write(f"ama conformance: {one_line(str(exc))}\n")
        return USAGE_ERROR
    ran = {rid for g in chosen for rid in g.ids} | set(TRANSCRIPT_IDS) if config.select else None
    results = outcomes(record, config.profiles, ran)
    verdicts = [verdict(p, results) for p in config.profiles]
    sys.stdout.write(text(results, verdicts, record.seconds, partial=bool(config.select)))
    if report_json:
        data = as_json(record, results, verdicts, config.command)
        Path(report_json).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    errors = [g.suite_error for g in record.groups if g.suite_error]
    if errors:  # the verdict cannot be trusted: say so, and exit as for any other failure to run the suite
        sys.stderr.write(
            "ama conformance: the suite itself failed (a bug, not the agent's):\n  "
            + "\n  ".join(one_line(e) for e in errors)
            + "\n"
        )
        return USAGE_ERROR
    return 0 if all(v.conformant for v in verdicts) else 1
