"""Command line: `ama --mode acp`, `ama -p`, `ama demo`, `ama models`, `ama sessions`, `ama stats`,
`ama acp-client`, `ama conformance`.

Startup matters (editors wait for `initialize`): this module imports only the standard library at the
top; each mode imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ama_acp import __version__

if TYPE_CHECKING:
    from ama_acp.config import Config

# Every subcommand with its one line for `ama --help`: the help is built from this table, not from the
# subcommands' own parsers, so `ama --mode acp` imports nothing more to start (each parser lives in its module).
SUBCOMMAND_HELP: dict[str, str] = {
    "setup": "choose a provider and model, store the key (run this first)",
    "doctor": "what ama would use and why; exit 0 when a prompt would work",
    "models": "the model catalog: window, prices, whether credentials are present",
    "sessions": "the stored sessions: list, show ID, delete ID, search TEXT",
    "stats": "a stored session's figures: billed tokens, cost, cache, context (no model)",
    "acp-client": "a terminal ACP client: drive ama or any ACP agent (-- AGENT COMMAND...)",
    "demo": "a complete ACP conversation with ama in a throwaway workspace",
    "conformance": "the ACP conformance suite against an agent command",
}
SUBCOMMANDS = tuple(SUBCOMMAND_HELP)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model id, provider/model (e.g. openai/gpt-4.1)")
    p.add_argument("--config", help="config file (TOML); default $AMA_CONFIG or ~/.config/ama/config.toml")
    p.add_argument("--data-dir", help="data directory; default $AMA_DATA_DIR or ~/.local/share/ama")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.add_argument("--cwd", help="working directory for -p (default: the current directory)")


def skip_httpx_cli() -> None:
    """httpx's package imports its command-line tool (httpx._main: click, pygments, rich) whenever click is
    installed (the mcp SDK's uvicorn brings it), only to define `httpx.main`, which ama never calls: ~15-40 ms of
    CPU in every ama process that talks HTTP. A None entry in sys.modules makes that one import fail as it does
    where click is missing, and httpx defines its stand-in `main` instead; the rest of httpx is the same. Done
    in ama's own process only (a module already imported is left as it is)."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    skip_httpx_cli()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        return _subcommand(argv[0], argv[1:])
    if len(argv) > 1 and argv[-1] == "setup":
        # ACP terminal sign-in: the editor runs the agent's own command with the method's args appended, so
        # `ama --mode acp [--config X] setup` is `ama setup [--config X]`.
        return _subcommand("setup", _setup_options(argv[:-1]))
    parser = main_parser()
    args = parser.parse_args(argv)
    if args.mode == "acp" and args.prompt is not None:
        parser.error("--mode acp and -p exclude each other")
    if args.mode == "acp":
        return _acp(args)
    if args.prompt is not None:
        return _print_mode(args)
    parser.print_help(sys.stderr)
    return 2


def main_parser() -> argparse.ArgumentParser:
    """The options of `ama` itself (`--mode acp`, `-p`); the subcommands parse their own."""
    parser = argparse.ArgumentParser(
        prog="ama",
        description="ama: a coding agent for editors (ACP)",
        epilog=_subcommands_epilog(),
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"ama {__version__}")
    parser.add_argument("--mode", choices=["acp"], help="acp: serve the Agent Client Protocol on stdio")
    parser.add_argument("-p", "--print", dest="prompt", metavar="PROMPT", help="answer one prompt and exit")
    parser.add_argument("--output-format", choices=["text", "json"], default="text")
    _common(parser)
    return parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's, as wide as the terminal as argparse finds it (COLUMNS, else the terminal's width, else 80),
    without its `import shutil`: argparse builds a formatter for every `add_argument`, and shutil brings bz2 and
    lzma, ~2 ms of every start of `ama --mode acp`."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _subcommands_epilog() -> str:
    """The subcommand list under the options: one line each, then where each one's own options are."""
    width = max(len(name) for name in SUBCOMMAND_HELP)
    lines = [f"  ama {name.ljust(width)}  {text}" for name, text in SUBCOMMAND_HELP.items()]
    return "\n".join(["subcommands:", *lines, "", "`ama SUBCOMMAND --help` shows each one's options."])


def _setup_options(argv: list[str]) -> list[str]:
    """The options of an agent command line that `ama setup` shares (which config file it writes)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config")
    known, _ = p.parse_known_args(argv)
    return ["--config", known.config] if known.config else []


def acp_main(argv: list[str] | None = None) -> int:
    """`ama-acp [OPTIONS]`: the ACP agent on stdio, as `ama --mode acp [OPTIONS]` — what the ACP registry's `uvx
    ama-acp` runs. `ama-acp setup …` is `ama setup …` (the terminal sign-in method runs the agent's own command
    with `setup`), and `ama-acp --version` answers as ama does."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        return _subcommand(argv[0], argv[1:])
    if any(a in ("-h", "--help", "--version") for a in argv):
        return main(argv)
    return main(["--mode", "acp", *argv])


def load_config_or_exit(args: argparse.Namespace) -> Config:
    """The configuration named by `--config`/`--data-dir` (and the environment), with its key variables
    registered as secrets; a bad config ends the process with its message and exit code 2."""
    from ama_acp.config import ConfigError, load_config

    try:
        cfg = load_config(args.config, args.data_dir)
    except ConfigError as exc:
        sys.stderr.write(f"ama: {exc}\n")
        raise SystemExit(2) from None
    for warning in cfg.warnings:  # ignored, not refused (config.py): said before anything starts
        sys.stderr.write(f"ama: warning: {warning}\n")
    from ama_acp.secrets import register_config

    # Before anything logs, writes a session or runs a command: the configured key variables are secrets too.
    register_config(cfg)
    return cfg


def _ignore_file_size_signal() -> None:
    """A file-size limit (RLIMIT_FSIZE) must fail the one write with EFBIG, which the session store reports,
    rather than kill the whole agent with SIGXFSZ."""
    import signal

    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _acp(args: argparse.Namespace) -> int:
    """Exit status 0 after stdin EOF or a stop signal (server.py STOP_SIGNALS), 2 for a bad config. While the
    server runs it catches SIGINT itself; a Ctrl-C before (starting up) or after (exiting) has nothing to clean
    up and ends as EOF does, without a traceback."""
    try:
        return _serve_acp(args)
    except KeyboardInterrupt:
        return 0


def _serve_acp(args: argparse.Namespace) -> int:
    # No garbage collection while ama starts: its imports allocate ~60,000 objects that live until exit, and the
    # collections they trigger walk them over and over (~6 % of the start's CPU, which an editor's first answer
    # waits on). server.py's preload turns the collector back on when it ends, whatever the first request is.
    import gc

    gc.disable()
    _ignore_file_size_signal()
    start = prepare_acp(args)
    from ama_acp.server import run_stdio

    return run_stdio(start.config, start.model_id, start.reload, start.why, collector_paused=True)


class AcpStart(NamedTuple):
    """What `ama --mode acp` serves (server.serve's arguments besides the streams)."""

    config: Config
    model_id: str | None  # None: no usable model yet, sessions need sign-in (`why` says what to do)
    reload: Callable[[], tuple[Config, str | None, str]]  # handlers.Reload: what `authenticate` reads again
    why: str


def prepare_acp(args: argparse.Namespace) -> AcpStart:
    """The configuration (its key variables registered as secrets), logging, and the model `ama --mode acp`
    starts with. Also what the tests' in-process server (tests/support/inprocess_agent.py) starts from, so a
    test run in the test's own process serves what the command would."""
    cfg = load_config_or_exit(args)
    from ama_acp.logs import setup_logging

    setup_logging(cfg.data_dir, args.log_level)
    import logging

    from ama_acp.providers.resolve import usable_model

    choice = usable_model(cfg, args.model)
    if choice.model_id is None:
        logging.getLogger("ama").warning("no usable model; sessions need sign-in: %s", choice.why)
    else:
        logging.getLogger("ama").info("model %s (%s)", choice.model_id, choice.why)

    def reload() -> tuple[Config, str | None, str]:
        """authenticate: the config file and the credentials read again (`ama setup` may have just run)."""
        from ama_acp.config import load_config
        from ama_acp.secrets import register_config

        fresh = load_config(args.config, args.data_dir)
        register_config(fresh)
        again = usable_model(fresh, args.model)
        return fresh, again.model_id, again.why

    return AcpStart(cfg, choice.model_id, reload, choice.why)


def _print_mode(args: argparse.Namespace) -> int:
    """Exit statuses: oneshot.py's (0 answered, 1 failed, 2 usage, 128 + N after signal N). Ctrl-C while no turn
    runs (starting up, or printing the last lines) is 130 too, with one line instead of a traceback."""
    _ignore_file_size_signal()
    try:
        cfg = load_config_or_exit(args)
        from ama_acp.oneshot import run_print

        return run_print(args, cfg)
    except KeyboardInterrupt:
        sys.stderr.write("\nama: interrupted (SIGINT)\n")
        return 130


def _model_configured() -> bool:
    """Whether `ama --mode acp` started now (default config, this environment) would have a usable model."""
    from ama_acp.config import ConfigError, load_config
    from ama_acp.providers.resolve import usable_model

    try:
        return usable_model(load_config(None, None), None).usable
    except ConfigError:
        return False


def _subcommand(name: str, rest: list[str]) -> int:
    if name == "conformance":
        # The suite ships beside ama (conformance/, installed as `ama_conformance`); imported only here.
        from ama_conformance.cli import main as run_conformance

        return run_conformance(rest)
    if name == "acp-client":
        from ama_acp.client.terminal.cli import run_acp_client

        return run_acp_client(rest)
    if name == "demo":
        from ama_acp.client.demo import run_demo

        return run_demo(rest, model_configured=_model_configured())
    if name == "models":
        if rest[:1] == ["cache-probe"]:
            from ama_acp.catalog_cli import run_cache_probe

            return run_cache_probe(rest[1:], load_config_or_exit)
        p = argparse.ArgumentParser(
            prog="ama models",
            description="the model catalog",
            epilog="ama models cache-probe MODEL [--tokens N] [--gap-ms MS] [--json]: send two identical requests "
            "to MODEL and report what the second read from the prompt cache (ama models cache-probe --help)",
        )
        p.add_argument("--json", action="store_true")
        p.add_argument("--config")
        p.add_argument("--data-dir")
        args = p.parse_args(rest)
        from ama_acp.catalog_cli import print_models

        return print_models(load_config_or_exit(args), args.json)
    if name == "doctor":
        from ama_acp.doctor import run_doctor

        return run_doctor(rest)
    if name == "setup":
        from ama_acp.setup.cli import run_setup

        return run_setup(rest)
    if name == "sessions":
        from ama_acp.session.store.cli import run_sessions

        return run_sessions(rest, load_config_or_exit)
    if name == "stats":
        from ama_acp.session.accounting.stored_stats import run_stats

        return run_stats(rest, load_config_or_exit)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
