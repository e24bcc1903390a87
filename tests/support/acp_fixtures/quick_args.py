"""A quick reading of a fixture agent's command line, so its start need not import argparse (with what argparse
imports, ~15 ms of CPU, a quarter of an agent's start, at each of the ~330 starts of one test run).

`quick(argv, options, defaults)` reads the plain forms only: `--name VALUE`, `--name=VALUE` and `--flag`, each
name spelled in full. For anything else it returns None — an abbreviation, `-h`, `--`, a positional argument, a
value that is empty, starts with `-`, does not convert or is not one of the choices — and the agent parses the
line with its argparse parser instead, so every error, usage and help message is argparse's own, byte for byte,
and what is read the quick way is what argparse reads from it. Stdlib only, imports nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    Option = tuple[str, str, Callable[[str], object] | None, Collection[object] | None]

FLAG = "flag"  # action="store_true"
ONE = "one"  # a value; the last one given wins
MANY = "many"  # action="append"


def quick(argv: list[str], options: Mapping[str, Option], defaults: dict[str, object]) -> dict[str, object] | None:
    """`options`: option string -> (dest, FLAG | ONE | MANY, type or None, choices or None). The values by dest
    (each dest starts at its default), or None where argparse must read the line."""
    values = {dest: list(v) if isinstance(v, list) else v for dest, v in defaults.items()}
    i = 0
    while i < len(argv):
        name, eq, given = argv[i].partition("=")
        i += 1
        option = options.get(name)
        if option is None:
            return None
        dest, kind, convert, choices = option
        if kind == FLAG:
            if eq:
                return None
            values[dest] = True
            continue
        if not eq:
            if i == len(argv):
                return None
            given = argv[i]
            i += 1
        if not given or given.startswith("-"):
            return None
        try:
            value = given if convert is None else convert(given)
        except ValueError:
            return None
        if choices is not None and value not in choices:
            return None
        if kind == MANY:
            given_so_far = values[dest]
            assert isinstance(given_so_far, list), f"{dest}: MANY's default is a list"
            given_so_far.append(value)
        else:
            values[dest] = value
    return values
