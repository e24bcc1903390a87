"""`ama conformance [options] -- AGENT CMD…` (also `python -m ama_conformance` from the repository).

Exit status: 0 when no profile run found a violation (CONFORMANT, or NO VIOLATION FOUND: some MANDATORY
requirement could not be tested, which `--strict` turns into 1), 1 when one did, 2 for a usage error (bad
options, an agent command that cannot be started or exits before answering initialize, a vendored schema that
fails its pin, a bug of the suite itself).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ama_acp.client.confine import configured_sandbox
from ama_acp.textsafe import one_line
from ama_conformance.core.config import Launcher, RunConfig, Timeouts, clean_env
from ama_conformance.core.homes import HomeCopyError, resolve_copies
from ama_conformance.requirements.registry import REGISTRY, Profile

USAGE_ERROR = 2
MAX_JOBS = 8  # groups at once: each holds an agent process or two

EPILOG = """\
examples:
  ama conformance -- ama --mode acp
  ama conformance --model-env OPENAI_BASE_URL={openai} --model-env OPENAI_API_KEY=x \\
      --model-env AMA_MODEL=openai/gpt-4.1 --profile all --report-json report.json -- ama --mode acp
  ama conformance -k "cancel or R131" -- my-agent --acp

--model-env values may name the suite's scripted model: {openai} (an OpenAI-compatible base URL, …/v1),
{anthropic} (an Anthropic base URL), {url} and {port}; the rest of a value is taken as it is (a JSON value
needs no escaping). With at least one, the suite serves that model on 127.0.0.1 and the agent's tool calls are
driven by it. docs/conformance.md explains tiers, verdicts and options.
"""


class _UsageError(Exception):
    """A command line the suite cannot run: said on stderr, exit status 2, before any agent starts."""


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _UsageError(f"{flag} wants NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ama conformance",
        description="Run the ACP conformance suite against any agent started as AGENT CMD… (after --).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--cwd", help="the agent's working directory (default: a fresh temporary directory)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set in the agent's environment")
    p.add_argument(
        "--env-clean",
        action="store_true",
        help="start the agent with PATH, HOME, TMPDIR, TERM and the locale (LANG, LANGUAGE, LC_*) only, plus --env",
    )
    p.add_argument(
        "--model-env",
        action="append",
        default=[],
        metavar="NAME=TEMPLATE",
        help="point the agent at the suite's scripted model",
    )
    p.add_argument(
        "--model-port",
        type=int,
        metavar="PORT",
        help="serve the scripted model on this 127.0.0.1 port (for an agent whose base URL is in a config file)",
    )
    p.add_argument(
        "--profile", action="append", choices=["acp", "usage", "all"], help="what to check (default acp; repeatable)"
    )
    p.add_argument(
        "-k", dest="select", metavar="EXPR", help="only groups matching EXPR (names, requirement ids, and/or/not)"
    )
    p.add_argument("--cancel-prompt", help="a prompt that keeps the agent busy long enough to cancel it")
    p.add_argument("--auth-method", help="the agent auth method to authenticate with (default: the first advertised)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds for a request (default 30)")
    p.add_argument("--prompt-timeout", type=float, default=120.0, help="seconds for a prompt turn (default 120)")
    p.add_argument("--exit-timeout", type=float, default=5.0, help="seconds to exit after stdin closes (default 5)")
    p.add_argument("--group-timeout", type=float, default=300.0, help="seconds for one group (default 300)")
    p.add_argument(
        "--keep-home",
        action="store_true",
        help="start the agent with the environment's HOME and XDG_* dirs (default: a fresh home for each group)",
    )
    p.add_argument(
        "--home-copy",
        action="append",
        default=[],
        metavar="PATH",
        help="copy PATH (relative to HOME, or inside it or an XDG dir) into each group's fresh home (repeatable)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=10.0,
        help="seconds a turn may show nothing before no turn is taken to complete (default 10; 0: off)",
    )
    p.add_argument("--jobs", type=int, default=1, help="groups run at once (default 1)")
    p.add_argument(
        "--progress",
        action="store_true",
        help="a line on stderr as each group ends (the default when stderr is a terminal)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a MANDATORY requirement could not be tested (NO VIOLATION FOUND), not only on a failure",
    )
    p.add_argument("--report-json", metavar="PATH", help="write the full record as JSON")
    p.add_argument("--list", action="store_true", help="print the requirement registry and exit")
    return p


def _profiles(chosen: list[str] | None) -> tuple[Profile, ...]:
    if not chosen:
        return (Profile.ACP,)
    if "all" in chosen:
        return (Profile.ACP, Profile.USAGE)
    return tuple(Profile(c) for c in dict.fromkeys(chosen))


def list_registry() -> str:
    lines = [f"{'id':<8}{'tier':<15}{'profile':<8}{'gate':<42}text"]
    for r in REGISTRY:
        lines.append(f"{r.id:<8}{r.tier.value:<15}{r.profile.value:<8}{(r.gate or '-'):<42}{r.text}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, *, launch: Launcher | None = None) -> int:
    """The command. `launch` is a seam for embedding the suite, not an option: it starts the agent instead of
    spawning AGENT CMD (conformance/core/config.py Launcher); everything else is the command's own."""
    args_in, command = _split(list(sys.argv[1:] if argv is None else argv))
    p = parser()
    try:
        args = p.parse_args(args_in)
    except SystemExit as exc:
        return 0 if exc.code == 0 else USAGE_ERROR
    if args.list:
        sys.stdout.write(list_registry())
        return 0
    if not command:
        p.print_usage(sys.stderr)
        sys.stderr.write("ama conformance: give the agent's command after --\n")
        return USAGE_ERROR
    try:
        return _run(args, _agent_command(command), launch)
    except _UsageError as exc:
        sys.stderr.write(f"ama conformance: {exc}\n")
        return USAGE_ERROR


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """The suite's options, and the agent's command after the first `--` ([] without one)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


def _agent_command(command: list[str]) -> list[str]:
    if shutil.which(command[0]) is None:
        raise _UsageError(f"cannot start {command[0]!r}: not found or not executable")
    if os.sep in command[0]:  # a path is the suite's, not the agent's: the agent starts in another directory
        return [str(Path(command[0]).absolute()), *command[1:]]
    return command


def _timeouts(args: argparse.Namespace) -> Timeouts:
    for name, value in (
        ("--timeout", args.timeout),
        ("--prompt-timeout", args.prompt_timeout),
        ("--exit-timeout", args.exit_timeout),
        ("--group-timeout", args.group_timeout),
    ):
        if not value > 0:
            raise _UsageError(f"{name} must be a positive number of seconds")
    if not args.stall_timeout >= 0:
        raise _UsageError("--stall-timeout must be 0 (off) or a positive number of seconds")
    return Timeouts(args.timeout, args.prompt_timeout, args.exit_timeout, args.group_timeout, stall=args.stall_timeout)


def _run(args: argparse.Namespace, command: list[str], launch: Launcher | None) -> int:
    """The run the options describe, in directories made for it and removed after it."""
    extra_env = _pairs(args.env, "--env")
    model_env = _pairs(args.model_env, "--model-env")
    timeouts = _timeouts(args)
    if args.model_port is not None and not 0 < args.model_port < 65536:
        raise _UsageError("--model-port must be between 1 and 65535")
    if not 1 <= args.jobs <= MAX_JOBS:
        raise _UsageError(f"--jobs must be between 1 and {MAX_JOBS}")
    env = (clean_env(dict(os.environ)) if args.env_clean else dict(os.environ)) | extra_env
    if args.keep_home and args.home_copy:
        raise _UsageError("--home-copy seeds the fresh homes, which --keep-home turns off")
    try:
        copies = resolve_copies(args.home_copy, env)
    except HomeCopyError as exc:
        raise _UsageError(str(exc)) from exc
    with tempfile.TemporaryDirectory(prefix="acp-conformance-") as tmp:
        root = Path(tmp)
        cwd = _agent_cwd(args.cwd, root)
        workspace = Path(tempfile.mkdtemp(prefix=".acp-conformance-", dir=cwd))
        scratch = root / "scratch"
        scratch.mkdir()
        try:
            config = RunConfig(
                command=command,
                cwd=cwd,
                workspace=workspace,
                scratch=scratch,
                env=env,
                timeouts=timeouts,
                cancel_prompt=args.cancel_prompt,
                auth_method=args.auth_method,
                profiles=_profiles(args.profile),
                select=args.select,
                model_env=model_env,
                model_port=args.model_port,
                # --cwd is the person's own directory: only what the suite made is the agent's to touch.
                created=(workspace, scratch) if args.cwd else (root,),
                launch=launch,
                homes=None if args.keep_home else root / "homes",
                home_copy=copies,
                jobs=args.jobs,
                progress=_progress if args.progress or sys.stderr.isatty() else None,
                sandbox=configured_sandbox(None, _warn),  # ama's config: AMA_CONFIG, else the default file
            )
            from ama_conformance.core.session_run import execute

            return execute(config, args.report_json, strict=args.strict)
        finally:
            shutil.rmtree(workspace, ignore_errors=True)


def _progress(line: str) -> None:
    sys.stderr.write(f"ama conformance: {one_line(line)}\n")
    sys.stderr.flush()


def _warn(text: str) -> None:
    sys.stderr.write(f"ama conformance: {text}\n")


def _agent_cwd(given: str | None, root: Path) -> Path:
    """--cwd, which must be a directory, or a fresh one under the run's temporary directory."""
    cwd = Path(given).resolve() if given else root / "agent-cwd"
    if not cwd.is_dir():
        if given:
            raise _UsageError(f"--cwd {given}: not a directory")
        cwd.mkdir()
    return cwd


if __name__ == "__main__":
    raise SystemExit(main())
