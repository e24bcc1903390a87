"""The questions `ama setup` asks. Each takes an `Io` (input, getpass and output as functions), so the tests
answer them without a terminal; each asks again, saying why, until the answer is usable. EOF (EOFError) and
Ctrl-C (KeyboardInterrupt) go through to the caller, which writes nothing."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ama_acp.setup import choices as c


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


Check = Callable[[str], str]  # a choices.check_* function: the accepted value, or SetupError


@dataclass(frozen=True)
class Io:
    ask: Callable[[str], str] = input
    secret: Callable[[str], str] = getpass.getpass  # no echo; reads the terminal itself
    say: Callable[[str], None] = _print


@dataclass(frozen=True)
class Entry:
    """One line of a numbered list: what choosing it returns, and what the person reads."""

    value: str
    label: str


def _list(io: Io, title: str, entries: Sequence[Entry]) -> None:
    io.say(title)
    width = len(str(len(entries)))
    for number, entry in enumerate(entries, 1):
        io.say(f"  {number:>{width}}) {entry.label}")


def _by_number(answer: str, entries: Sequence[Entry], default: int | None) -> str | None:
    """The value the answer names by number (nothing: the default's), or None."""
    if not answer and default is not None:
        return entries[default - 1].value
    if answer.isdigit() and 1 <= int(answer) <= len(entries):
        return entries[int(answer) - 1].value
    return None


def _ask_listed(io: Io, entries: Sequence[Entry], prompt: str, default: int | None, unnumbered: Check) -> str:
    """The answer to a numbered list (already shown): an entry chosen by number (nothing: the default's), or what
    `unnumbered` makes of any other answer; asked again, saying why, while `unnumbered` refuses it."""
    suffix = f" [{default}]" if default is not None else ""
    while True:
        answer = io.ask(f"{prompt}{suffix}: ").strip()
        numbered = _by_number(answer, entries, default)
        if numbered is not None:
            return numbered
        try:
            return unnumbered(answer)
        except c.SetupError as exc:
            io.say(f"  {exc}.")


def pick(io: Io, title: str, entries: Sequence[Entry], prompt: str, default: int | None = None) -> str:
    """A numbered list; the answer is a number, an entry's value, or (with a default) nothing."""

    def by_value(answer: str) -> str:
        for entry in entries:
            if answer == entry.value:
                return entry.value
        raise c.SetupError(f"Type a number from 1 to {len(entries)}")

    _list(io, title, entries)
    return _ask_listed(io, entries, prompt, default, by_value)


def choose_provider(io: Io) -> str:
    """A built-in provider's name, or choices.CUSTOM."""
    names = c.builtin_names()
    entries = [Entry(n, c.LABELS.get(n, n)) for n in names[:2]]
    entries.append(Entry(c.CUSTOM, "An OpenAI-compatible server at a URL (a local vLLM, llama.cpp, Ollama, …)"))
    entries += [Entry(n, c.LABELS.get(n, n)) for n in names[2:]]
    return pick(io, "Where should ama get its model?", entries, "Provider")


def ask_checked(io: Io, prompt: str, check: Check, default: str | None = None) -> str:
    """A free-text answer, passed through `check` (a choices.check_* function) until it is accepted."""
    suffix = f" [{default}]" if default is not None else ""
    while True:
        answer = io.ask(f"{prompt}{suffix}: ")
        if not answer.strip() and default is not None:
            answer = default
        try:
            return check(answer)
        except c.SetupError as exc:
            io.say(f"  {exc}.")


def yes_no(io: Io, question: str, default: bool) -> bool:
    hint = "[Y/n]" if default else "[y/N]"
    while True:
        answer = io.ask(f"{question} {hint} ").strip().lower()
        if not answer:
            return default
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        io.say("  Answer y or n.")


def ask_key(io: Io, option: c.ProviderOption) -> str:
    """The key, pasted without echo; never repeated back, not even in an error."""
    where = f" (from {option.key_page})" if option.key_page else ""
    while True:
        try:
            return c.check_key(io.secret(f"Paste the API key for {option.label}{where}, then Enter (not shown): "))
        except c.SetupError as exc:
            io.say(f"  {exc}.")


def after_failure(io: Io, custom: bool) -> str:
    """What to do when the check failed for another reason than a refused key: "retry", "url" (custom only),
    "skip" (save without the check) or "quit"."""
    options = "Enter to try again, " + ("u to change the URL, " if custom else "") + "s to save without checking"
    while True:
        answer = io.ask(f"{options}, q to quit: ").strip().lower()
        if not answer:
            return "retry"
        if answer == "u" and custom:
            return "url"
        if answer in ("s", "q"):
            return {"s": "skip", "q": "quit"}[answer]
        io.say("  Type one of the letters, or press Enter.")


def choose_model(io: Io, option: c.ProviderOption, entries: Sequence[Entry], default: str | None) -> str:
    """The default model's id: one of `entries` (numbered, `default` preselected), or any id typed; with no
    entries, typed."""
    if not entries:
        return ask_checked(io, f"Model (as {option.label} names it)", lambda text: c.model_id(option, text))
    listed = {e.value for e in entries}
    numbered = list(entries)
    preset = next((i for i, e in enumerate(numbered, 1) if e.value == default), None)

    def typed(answer: str) -> str:
        chosen = c.model_id(option, answer)
        if chosen not in listed:
            io.say(f"  {chosen} is not in the list; it is used as typed.")
        return chosen

    _list(io, "Default model (type a number, or any model id):", numbered)
    return _ask_listed(io, numbered, "Model", preset, typed)


def ask_context_window(io: Io, model: str) -> int | None:
    """The model's context window in tokens, for the context meter; Enter: unknown (None)."""
    while True:
        answer = io.ask(f"Context window of {model} in tokens (Enter if you do not know): ").strip()
        if not answer:
            return None
        try:
            return c.check_context_window(answer)
        except c.SetupError as exc:
            io.say(f"  {exc}.")
