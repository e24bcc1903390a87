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
        config_path, cred_path = self._paths()
        # Both files are read before any question: one that cannot be used is exit 2, and never overwritten.
        existing = read_existing(config_path)
        stored = check_credentials(cred_path)
        cfg = parse_config(existing.text or "", str(config_path))
        option = self._provider()
        key = self._key(option, stored, cred_path)
        option, key, verdict = self._verified(option, key)
        model = self._model(option, cfg, verdict)
        catalog = Catalog(cfg.models)
        table = _provider_table(option)
        window = self._window(option, model, catalog, verdict)
        add_model = _adds_model_entry(model, cfg, catalog, window)
        rendered = render(existing, model, table, add_model=add_model, context_window=window.given)
        plan = Plan(config_path, rendered.text, existing.text, cred_path, _keys_to_store(option, key))
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

    def _paths(self) -> tuple[Path, Path]:
        """The config file and the credentials file to write: the flags, else the defaults."""
        args = self.args
        config_path = Path(args.config).expanduser() if args.config else default_config_path(dict(self.env))
        cred_path = Path(args.credentials).expanduser() if args.credentials else credentials_path(self.env)
        return config_path, cred_path

    def _check_flags(self) -> None:
        a = self.args
        if a.context_window is not None:
            try:
                a.context_window = c.check_context_window(a.context_window)
            except c.SetupError as exc:
                raise c.SetupError(f"--context-window: {exc}") from None
        _check_custom_only(a)
        if a.no_key and (a.api_key_stdin or a.api_key_env):
            raise c.SetupError("--no-key excludes --api-key-stdin and --api-key-env")
        if a.api_key_stdin and a.api_key_env:
            raise c.SetupError("the key comes from --api-key-stdin or from --api-key-env, not both")

    # --- the provider -----------------------------------------------------------------------------------------

    def _provider(self) -> c.ProviderOption:
        name = self._provider_name()
        if name == c.CUSTOM:
            return self._custom_provider()
        if name not in BUILTIN_ENDPOINTS:
            raise c.SetupError(f"unknown provider {name!r}: one of {', '.join(c.builtin_names())}, or custom")
        return c.builtin_option(name, self.env)

    def _provider_name(self) -> str:
        """--provider, else custom when a flag only a custom server takes is given, else asked."""
        a = self.args
        given: str | None = a.provider
        if given:
            return given.strip()
        if a.base_url or a.name or a.no_key:
            return c.CUSTOM
        if not self.interactive:
            raise c.SetupError(
                f"--provider is needed ({', '.join(c.builtin_names())} or custom), or run `ama setup` in a "
                "terminal to be asked"
            )
        return prompts.choose_provider(self.io)

    def _custom_provider(self) -> c.ProviderOption:
        a = self.args
        url = self._answer(a.base_url, "--base-url", c.check_url, "Server base URL (e.g. http://127.0.0.1:8080/v1)")
        if a.name:
            name = c.check_name(a.name)
        elif self.interactive:
            name = prompts.ask_checked(self.io, "A short name for it", c.check_name, "local")
        else:
            name = "local"
        variable = None
        if self._custom_needs_key():
            variable = c.check_env_name(a.api_key_env) if a.api_key_env else c.key_variable_for(name)
        return c.custom_option(name, url, variable)

    def _custom_needs_key(self) -> bool:
        a = self.args
        if a.no_key:
            return False
        if a.api_key_stdin or a.api_key_env or not self.interactive:
            return True
        return prompts.yes_no(self.io, "Does the server need an API key?", False)

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
        """The key, first found: stdin (--api-key-stdin), the environment, the credentials file, asked."""
        variable = option.key_variable
        if variable is None:
            return Key(None, False)
        if self.args.api_key_stdin:
            return _checked_key(self.stdin.readline(c.MAX_KEY + 2), "the key on stdin")
        found = self._key_in_env(variable) or self._key_stored(variable, stored, cred_path)
        if found is not None:
            return found
        if self.interactive:
            return Key(prompts.ask_key(self.io, option), True)
        raise c.SetupError(
            f"no key for {option.label}: pass it on stdin with --api-key-stdin, or name the environment variable "
            "that holds it with --api-key-env VAR"
            + ("" if option.builtin else ", or --no-key for a server without one")
        )

    def _key_in_env(self, variable: str) -> Key | None:
        """The key in --api-key-env's variable (which must hold one), else in the provider's, if it is to be used."""
        a = self.args
        source = c.check_env_name(a.api_key_env) if a.api_key_env else variable
        in_env = self.env.get(source)
        if a.api_key_env and not in_env:
            raise c.SetupError(f"{source} is not set in the environment (--api-key-env reads the key from it)")
        if not in_env:
            return None
        if a.api_key_env or self._agreed(f"{source} is set in the environment: store that key for ama?"):
            return _checked_key(in_env, f"the key in {source}")
        return None

    def _key_stored(self, variable: str, stored: Mapping[str, str], cred_path: Path) -> Key | None:
        if stored.get(variable) and self._agreed(f"A key for {variable} is already stored in {cred_path}: keep it?"):
            return Key(stored[variable], False)
        return None

    def _agreed(self, question: str) -> bool:
        """Yes when nobody can be asked, else the person's answer (yes by default)."""
        return not self.interactive or prompts.yes_no(self.io, question, True)

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
                option, key = self._key_again(option)
                continue
            action = prompts.after_failure(self.io, custom=not option.builtin)
            if action == "skip":
                return option, key, Verdict(True, "not checked")
            option = self._next_try(option, action)

    def _key_again(self, option: c.ProviderOption) -> tuple[c.ProviderOption, Key]:
        """The server refused the key: ask for another (a custom server may want one after all)."""
        if option.key_variable is None:
            option = replace(option, key_variable=c.key_variable_for(option.name))
        self.io.say("  Paste the key again (Ctrl-C to stop).")
        key = Key(prompts.ask_key(self.io, option), True)
        register_secret_values([key.value or ""])
        return option, key

    def _next_try(self, option: c.ProviderOption, action: str) -> c.ProviderOption:
        """The provider to check again after a failure the person chose to retry ("retry" or "url"), or quit."""
        if action == "quit":
            raise c.SetupError("nothing was written", code=1)
        if action == "url":
            url = prompts.ask_checked(self.io, "Server base URL", c.check_url)
            return c.custom_option(option.name, url, option.key_variable)
        return option

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
        return _unasked_model(option, entries, default)

    def _model_entries(
        self, option: c.ProviderOption, cfg: Config, verdict: Verdict
    ) -> tuple[list[prompts.Entry], str | None]:
        """The models to offer, and the one preselected: the catalog's for a built-in provider (its default
        model first choice), the server's list for a custom one (the config's current model if listed)."""
        if option.builtin:
            known = [m for m in Catalog(cfg.models).all() if m.provider == option.name]
            entries = [prompts.Entry(m.id, f"{m.id}  ({m.name})" if m.name != m.model else m.id) for m in known]
            return entries, _preselected(entries, DEFAULT_MODELS.get(option.name))
        entries = []
        for name in verdict.models:
            try:
                entries.append(prompts.Entry(c.model_id(option, name), c.model_id(option, name)))
            except c.SetupError:
                continue
        return entries, _preselected(entries, cfg.model)

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
        self._report_key(plan, option.key_variable, key)
        if self.env.get("AMA_MODEL") and self.env.get("AMA_MODEL") != model:
            say("Note: AMA_MODEL is set in this environment; ama uses it before the config's model.")
        default = default_config_path(dict(self.env))
        hint = "" if plan.config_path == default else f" --config {plan.config_path}"
        say(f"Check with: ama doctor{hint}")

    def _report_key(self, plan: Plan, variable: str | None, key: Key) -> None:
        say = self.io.say
        if plan.keys:
            say(f"Stored {variable} in {plan.credentials_path} (readable only by you).")
        elif variable and key.value:
            say(f"Kept the key already stored for {variable} in {plan.credentials_path}.")
        else:
            say("No key is needed for this server.")
        if plan.credentials_path != credentials_path(self.env) and plan.keys:
            say(f"  ama reads that file only when AMA_CREDENTIALS names it: AMA_CREDENTIALS={plan.credentials_path}")
        in_env = self.env.get(variable) if variable else None
        if in_env and key.value and in_env != key.value:
            say(f"Note: {variable} is also set in this environment, with another value; ama uses that one first.")


@dataclass(frozen=True)
class Window:
    given: int | None  # to write into the model's [[models]] entry
    known: int | None  # what ama will know for the model afterwards (None: the meter is off)


def _check_custom_only(a: argparse.Namespace) -> None:
    """--base-url, --name and --no-key describe a custom server: with another --provider they are a mistake."""
    if not a.provider or a.provider.strip() == c.CUSTOM:
        return
    custom_only = (("--base-url", a.base_url), ("--name", a.name), ("--no-key", a.no_key))
    given = [flag for flag, value in custom_only if value]
    if given:
        raise c.SetupError(f"{', '.join(given)} go with --provider custom only")


def _checked_key(text: str, where: str) -> Key:
    try:
        return Key(c.check_key(text), True)
    except c.SetupError as exc:
        raise c.SetupError(f"{where}: {exc}") from None


def _provider_table(option: c.ProviderOption) -> ProviderTable | None:
    """The `[providers.NAME]` table a custom server needs; a built-in provider needs none."""
    if option.builtin:
        return None
    return ProviderTable(option.name, option.kind, option.base_url, option.key_variable)


def _adds_model_entry(model: str, cfg: Config, catalog: Catalog, window: Window) -> bool:
    """A model the catalog does not know gets a `[[models]]` entry; a catalog model only to carry a window it was
    given (an override), and only when the config has no entry for it yet."""
    if model not in catalog:
        return True
    return window.given is not None and not any(entry.id == model for entry in cfg.models)


def _keys_to_store(option: c.ProviderOption, key: Key) -> dict[str, str]:
    if key.store and key.value and option.key_variable:
        return {option.key_variable: key.value}
    return {}


def _preselected(entries: list[prompts.Entry], preferred: str | None) -> str | None:
    """`preferred` when it is offered, else the first offered, else None."""
    ids = [e.value for e in entries]
    if preferred in ids:
        return preferred
    return ids[0] if ids else None


def _unasked_model(option: c.ProviderOption, entries: list[prompts.Entry], default: str | None) -> str:
    """The model without a --model and nobody to ask: the default, when it is not a guess among many."""
    if default is not None and (option.builtin or len(entries) == 1):
        return default
    listed = ", ".join(e.value for e in entries[:10]) + (", …" if len(entries) > 10 else "")
    raise c.SetupError("--model is needed" + (f" (the server lists {listed})" if entries else ""))


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
