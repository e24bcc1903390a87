"""`ama setup`: the flow, its flags and exit codes (docs/configuration.md "Setting up: `ama setup`").

Interactive when stdin is a terminal (and neither `--yes` nor `--api-key-stdin` is given): every flag that is
given answers its question, the others are asked. Otherwise nothing is asked, and a missing flag is exit 2.
Exit codes: 0 written; 1 the check failed, input ended or the person declined; 2 a bad flag, answer or existing
file; 130 Ctrl-C. In every case but 0 nothing was written: both files are written only at the very end.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TextIO

from ama_acp.config import Config, default_config_path, parse_config
from ama_acp.credentials import credentials_path
from ama_acp.providers.catalog import Catalog
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS
from ama_acp.providers.resolve import DEFAULT_MODELS
from ama_acp.secrets import register_secret_values
from ama_acp.setup import choices as c
from ama_acp.setup import prompts
from ama_acp.setup.verify import Verdict, models_url, verify
from ama_acp.setup.write import Plan, ProviderTable, Rendered, check_credentials, commit, read_existing, render

MAX_LISTED = 40  # models shown in the numbered list; any other id can still be typed


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ama setup",
        description="Choose a provider, store its key (credentials file, 0600) and a default model (config file).",
    )
    builtins = ", ".join(c.builtin_names())
    p.add_argument("--provider", help=f"{builtins}, or custom (an OpenAI-compatible server at --base-url)")
    p.add_argument("--base-url", help="custom: the server's base URL, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--name", help="custom: the provider's name in model ids (default local)")
    p.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="read the key from this environment variable (custom: "
        "also the variable it is stored under; default NAME_API_KEY)",
    )
    p.add_argument("--api-key-stdin", action="store_true", help="read the key from one line of stdin")
    p.add_argument("--no-key", action="store_true", help="custom: the server needs no key")
    p.add_argument("--model", help="the default model: provider/model or the model's name")
    p.add_argument(
        "--context-window",
        metavar="N",
        help="the model's context window in tokens, for the context meter (default: what the server's model "
        "list states; asked in a terminal when it states none)",
    )
    p.add_argument("--no-verify", action="store_true", help="do not check the key with the server")
    p.add_argument("--config", help="config file to write (default $AMA_CONFIG or ~/.config/ama/config.toml)")
    p.add_argument(
        "--credentials", help="credentials file (default $AMA_CREDENTIALS or ~/.config/ama/credentials.toml)"
    )
    p.add_argument("--yes", action="store_true", help="ask nothing: every choice comes from the flags")
    return p


def run_setup(
    argv: list[str],
    *,
    io: prompts.Io | None = None,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    interactive: bool | None = None,
) -> int:
    args = parser().parse_args(argv)
    env = os.environ if env is None else env
    stdin = sys.stdin if stdin is None else stdin
    if interactive is None:
        interactive = not args.yes and not args.api_key_stdin and _isatty(stdin)
    io = io or prompts.Io()
    with _one_interrupt():
        try:
            return Setup(args, env, stdin, io, interactive).run()
        except KeyboardInterrupt:
            _err("\nama setup: interrupted; nothing was written.")
            return 130
        except EOFError:
            _err("\nama setup: the input ended; nothing was written.")
            return 1
        except c.SetupError as exc:
            _err(f"ama setup: {exc}")
            return exc.code


@contextmanager
def _one_interrupt() -> Iterator[None]:
    """The first Ctrl-C ends setup, and the ones after it are ignored until the process has exited.

    People press Ctrl-C twice. With Python's own handler a second SIGINT that lands while the first unwinds, or
    while the interpreter shuts down after the message, kills the process by the signal (a traceback, status
    -SIGINT) instead of exit 130; a test that presses again when a loaded machine is slow to exit saw that. So
    the handler ignores SIGINT before it raises, and SIGINT stays ignored once it has run (the process is only
    finishing); if it never ran, the previous handler comes back."""

    def first(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, first)
    except ValueError:  # not the main thread (a test calling run_setup): the caller's handling stands
        yield
        return
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is first:
            signal.signal(signal.SIGINT, previous)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


@dataclass
class Key:
    value: str | None  # None: the provider needs none
    store: bool  # it goes into the credentials file (it is new, or came from the environment)


class Setup:
    def __init__(
        self, args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO, io: prompts.Io, interactive: bool
    ) -> None:
        self.args, self.env, self.stdin, self.io, self.interactive = args, env, stdin, io, interactive

    def run(self) -> int:
        self._check_flags()
        args = self.args
        config_path = Path(args.config).expanduser() if args.config else default_config_path(dict(self.env))
        cred_path = Path(args.credentials).expanduser() if args.credentials else credentials_path(self.env)
        # Both files are read before any question: one that cannot be used is exit 2, and never overwritten.
        existing = read_existing(config_path)
        stored = check_credentials(cred_path)
        cfg = parse_config(existing.text or "", str(config_path))
        option = self._provider()
        key = self._key(option, stored, cred_path)
        option, key, verdict = self._verified(option, key)
        model = self._model(option, cfg, verdict)
        catalog = Catalog(cfg.models)
        table = (
            None if option.builtin else ProviderTable(option.name, option.kind, option.base_url, option.key_variable)
        )
        window = self._window(option, model, catalog, verdict)
        in_config = any(entry.id == model for entry in cfg.models)
        # A catalog model gets a `[[models]]` entry only to carry a window it was given (an override).
        add_model = model not in catalog or (window.given is not None and not in_config)
        rendered = render(existing, model, table, add_model=add_model, context_window=window.given)
        keys = {option.key_variable: key.value} if key.store and key.value and option.key_variable else {}
        plan = Plan(config_path, rendered.text, existing.text, cred_path, keys)
        if self.interactive and not self._confirmed(plan, model):
            raise c.SetupError("nothing was written", code=1)
        _uninterrupted(plan)
        self._report(plan, model, option, key, table, rendered)
        if window.known is None:
            self.io.say(
                f"The context meter will be off for {model}, as its context window is unknown: run `ama setup "
                f"--context-window N` again, or add `context_window = N` (tokens) to its [[models]] entry in "
                f"{plan.config_path}."
            )
        return 0

    def _check_flags(self) -> None:
        a = self.args
        if a.context_window is not None:
            try:
                a.context_window = c.check_context_window(a.context_window)
            except c.SetupError as exc:
                raise c.SetupError(f"--context-window: {exc}") from None
        custom_only = (("--base-url", a.base_url), ("--name", a.name), ("--no-key", a.no_key))
        if a.provider and a.provider.strip() != c.CUSTOM:
            given = [flag for flag, value in custom_only if value]
            if given:
                raise c.SetupError(f"{', '.join(given)} go with --provider custom only")
        if a.no_key and (a.api_key_stdin or a.api_key_env):
            raise c.SetupError("--no-key excludes --api-key-stdin and --api-key-env")
        if a.api_key_stdin and a.api_key_env:
            raise c.SetupError("the key comes from --api-key-stdin or from --api-key-env, not both")

    # --- the provider -----------------------------------------------------------------------------------------

    def _provider(self) -> c.ProviderOption:
        a, io = self.args, self.io
        name = a.provider.strip() if a.provider else None
        if name is None and (a.base_url or a.name or a.no_key):
            name = c.CUSTOM  # the flags only a custom server takes say which provider this is
        if name is None:
            if not self.interactive:
                raise c.SetupError(
                    f"--provider is needed ({', '.join(c.builtin_names())} or custom), or run `ama setup` in a "
                    "terminal to be asked"
                )
            name = prompts.choose_provider(io)
        if name != c.CUSTOM:
            if name not in BUILTIN_ENDPOINTS:
                raise c.SetupError(f"unknown provider {name!r}: one of {', '.join(c.builtin_names())}, or custom")
            return c.builtin_option(name, self.env)
        url = self._answer(a.base_url, "--base-url", c.check_url, "Server base URL (e.g. http://127.0.0.1:8080/v1)")
        pname = c.check_name(a.name) if a.name else None
        if pname is None:
            pname = (
                prompts.ask_checked(io, "A short name for it", c.check_name, "local") if self.interactive else "local"
            )
        if a.no_key:
            needs_key = False
        elif a.api_key_stdin or a.api_key_env or not self.interactive:
            needs_key = True
        else:
            needs_key = prompts.yes_no(io, "Does the server need an API key?", False)
        variable = None
        if needs_key:
            variable = c.check_env_name(a.api_key_env) if a.api_key_env else c.key_variable_for(pname)
        return c.custom_option(pname, url, variable)

    def _answer(self, given: str | None, flag: str, check: prompts.Check, question: str) -> str:
        if given is not None:
            try:
                return check(given)
            except c.SetupError as exc:
                raise c.SetupError(f"{flag}: {exc}") from None
        if not self.interactive:
            raise c.SetupError(f"{flag} is needed")
        return prompts.ask_checked(self.io, question, check)

    # --- the key ----------------------------------------------------------------------------------------------

    def _key(self, option: c.ProviderOption, stored: Mapping[str, str], cred_path: Path) -> Key:
        a, io = self.args, self.io
        variable = option.key_variable
        if variable is None:
            return Key(None, False)
        if a.api_key_stdin:
            line = self.stdin.readline(c.MAX_KEY + 2)
            try:
                return Key(c.check_key(line), True)
            except c.SetupError as exc:
                raise c.SetupError(f"the key on stdin: {exc}") from None
        source = c.check_env_name(a.api_key_env) if a.api_key_env else variable
        in_env = self.env.get(source)
        if a.api_key_env and not in_env:
            raise c.SetupError(f"{source} is not set in the environment (--api-key-env reads the key from it)")
        if in_env and (
            a.api_key_env
            or not self.interactive
            or prompts.yes_no(io, f"{source} is set in the environment: store that key for ama?", True)
        ):
            try:
                return Key(c.check_key(in_env), True)
            except c.SetupError as exc:
                raise c.SetupError(f"the key in {source}: {exc}") from None
        if stored.get(variable) and (
            not self.interactive
            or prompts.yes_no(io, f"A key for {variable} is already stored in {cred_path}: keep it?", True)
        ):
            return Key(stored[variable], False)
        if self.interactive:
            return Key(prompts.ask_key(io, option), True)
        raise c.SetupError(
            f"no key for {option.label}: pass it on stdin with --api-key-stdin, or name the environment variable "
            "that holds it with --api-key-env VAR"
            + ("" if option.builtin else ", or --no-key for a server without one")
        )

    # --- the check --------------------------------------------------------------------------------------------

    def _verified(self, option: c.ProviderOption, key: Key) -> tuple[c.ProviderOption, Key, Verdict]:
        """Check the key (and URL) until they work; interactively, ask again on failure."""
        if self.args.no_verify:
            return option, key, Verdict(True, "not checked (--no-verify)")
        if key.value:
            register_secret_values([key.value])  # from here on, nothing ama logs can show it
        while True:
            self.io.say(f"Checking {models_url(option)} …")
            verdict = verify(option, key.value)
            if verdict.ok:
                self.io.say(f"OK: {verdict.message}.")
                return option, key, verdict
            if not self.interactive:
                raise c.SetupError(f"{verdict.message}; nothing was written", code=1)
            self.io.say(f"  {verdict.message}.")
            if verdict.refused:
                if option.key_variable is None:  # a custom server that wants a key after all
                    option = replace(option, key_variable=c.key_variable_for(option.name))
                self.io.say("  Paste the key again (Ctrl-C to stop).")
                key = Key(prompts.ask_key(self.io, option), True)
                register_secret_values([key.value or ""])
                continue
            action = prompts.after_failure(self.io, custom=not option.builtin)
            if action == "quit":
                raise c.SetupError("nothing was written", code=1)
            if action == "skip":
                return option, key, Verdict(True, "not checked")
            if action == "url":
                url = prompts.ask_checked(self.io, "Server base URL", c.check_url)
                option = c.custom_option(option.name, url, option.key_variable)

    # --- the model --------------------------------------------------------------------------------------------

    def _model(self, option: c.ProviderOption, cfg: Config, verdict: Verdict) -> str:
        entries, default = self._model_entries(option, cfg, verdict)
        if self.args.model:
            try:
                return c.model_id(option, self.args.model)
            except c.SetupError as exc:
                raise c.SetupError(f"--model: {exc}") from None
        if self.interactive:
            shown = entries[:MAX_LISTED]
            if len(entries) > len(shown):
                self.io.say(f"({len(entries) - len(shown)} more models are listed by the server: type any id)")
            return prompts.choose_model(self.io, option, shown, default)
        if default is not None and (option.builtin or len(entries) == 1):
            return default
        listed = ", ".join(e.value for e in entries[:10]) + (", …" if len(entries) > 10 else "")
        raise c.SetupError("--model is needed" + (f" (the server lists {listed})" if entries else ""))

    def _model_entries(
        self, option: c.ProviderOption, cfg: Config, verdict: Verdict
    ) -> tuple[list[prompts.Entry], str | None]:
        """The models to offer, and the one preselected: the catalog's for a built-in provider (its default
        model first choice), the server's list for a custom one (the config's current model if listed)."""
        if option.builtin:
            known = [m for m in Catalog(cfg.models).all() if m.provider == option.name]
            entries = [prompts.Entry(m.id, f"{m.id}  ({m.name})" if m.name != m.model else m.id) for m in known]
            ids = [e.value for e in entries]
            preferred = DEFAULT_MODELS.get(option.name)
            return entries, preferred if preferred in ids else (ids[0] if ids else None)
        entries = []
        for name in verdict.models:
            try:
                entries.append(prompts.Entry(c.model_id(option, name), c.model_id(option, name)))
            except c.SetupError:
                continue
        ids = [e.value for e in entries]
        return entries, cfg.model if cfg.model in ids else (ids[0] if ids else None)

    # --- the context window -----------------------------------------------------------------------------------

    def _window(self, option: c.ProviderOption, model: str, catalog: Catalog, verdict: Verdict) -> Window:
        """The context window to write for `model` (the flag, else what the server's list states, else asked),
        and the one ama will know once written. A model the catalog (or the config) already gives a window is
        not asked about; without a window the meter is off (no usage_update), which the caller says."""
        flag: int | None = self.args.context_window
        if flag is not None:
            return Window(flag, flag)
        info = catalog.get(model)
        if info is not None and info.context_window is not None:
            return Window(None, info.context_window)
        listed = _listed_window(option, model, verdict)
        if listed is not None:
            self.io.say(f"Context window of {model}: {listed} tokens, as the server's model list states.")
            return Window(listed, listed)
        if self.interactive:
            asked = prompts.ask_context_window(self.io, model)
            return Window(asked, asked)
        return Window(None, None)

    # --- writing ----------------------------------------------------------------------------------------------

    def _confirmed(self, plan: Plan, model: str) -> bool:
        self.io.say(f"About to write {plan.config_path} (model = {model})")
        if plan.keys:
            self.io.say(f"  and store {', '.join(plan.keys)} in {plan.credentials_path} (readable only by you).")
        return prompts.yes_no(self.io, "Write?", True)

    def _report(
        self,
        plan: Plan,
        model: str,
        option: c.ProviderOption,
        key: Key,
        table: ProviderTable | None,
        rendered: Rendered,
    ) -> None:
        say = self.io.say
        extra = f", [providers.{table.name}]" if table else ""
        say(f"Wrote {plan.config_path}: model = {model}{extra}.")
        if rendered.comments_lost:
            say("  (Its layout could not be edited in place: it was rewritten, and its comments were not kept.)")
        variable = option.key_variable
        if plan.keys:
            say(f"Stored {variable} in {plan.credentials_path} (readable only by you).")
        elif variable and key.value:
            say(f"Kept the key already stored for {variable} in {plan.credentials_path}.")
        else:
            say("No key is needed for this server.")
        if plan.credentials_path != credentials_path(self.env) and plan.keys:
            say(f"  ama reads that file only when AMA_CREDENTIALS names it: AMA_CREDENTIALS={plan.credentials_path}")
        if variable and self.env.get(variable) and key.value and self.env.get(variable) != key.value:
            say(f"Note: {variable} is also set in this environment, with another value; ama uses that one first.")
        if self.env.get("AMA_MODEL") and self.env.get("AMA_MODEL") != model:
            say("Note: AMA_MODEL is set in this environment; ama uses it before the config's model.")
        default = default_config_path(dict(self.env))
        hint = "" if plan.config_path == default else f" --config {plan.config_path}"
        say(f"Check with: ama doctor{hint}")


@dataclass(frozen=True)
class Window:
    given: int | None  # to write into the model's [[models]] entry
    known: int | None  # what ama will know for the model afterwards (None: the meter is off)


def _listed_window(option: c.ProviderOption, model: str, verdict: Verdict) -> int | None:
    """The window the server's list states for `model` (an ama id), matching its names as setup turned them
    into ids."""
    for name, window in verdict.windows.items():
        try:
            if c.model_id(option, name) == model:
                return window
        except c.SetupError:
            continue
    return None


def _uninterrupted(plan: Plan) -> None:
    """The two writes take milliseconds; a Ctrl-C between them must not leave one written and the other not,
    so SIGINT waits (is ignored) until both are done or both are undone."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (a test calling run_setup): nothing to hold off
        commit(plan)
        return
    try:
        commit(plan)
    finally:
        signal.signal(signal.SIGINT, previous)
