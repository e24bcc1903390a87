"""`--model-env` values: the placeholders naming the suite's scripted model, and nothing else touched.

`{openai}`, `{anthropic}`, `{url}` and `{port}` are replaced; every other character is the value as given, so a
JSON value (`{"baseURL": "{openai}"}`) needs no escaping. A brace pair around a bare word that is not one of
them (`{opneai}`, `{0}`, `{url.x}`) is a mistyped placeholder and an error, never passed on silently; JSON cannot
produce one (its keys are quoted).

Before this syntax, values went through Python's `str.format`, so a literal brace had to be doubled. `{{` never
occurs in JSON (an object's first key is a string), so a value containing it is read the old way, and values
written for it keep working.
"""

from __future__ import annotations

import re

_CANDIDATE = re.compile(r"\{([A-Za-z0-9_.\[\]]+)\}")


class PlaceholderError(ValueError):
    """A value names a placeholder that does not exist (or breaks the older `{{ }}` syntax)."""


def expand(template: str, values: dict[str, str]) -> str:
    """`template` with the known placeholders replaced by `values`; PlaceholderError for an unknown one."""
    if "{{" in template:
        try:
            return template.format_map(values)
        except (KeyError, ValueError, IndexError, AttributeError, TypeError) as exc:
            raise PlaceholderError(f"unknown placeholder {exc}") from exc

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise PlaceholderError(f"unknown placeholder {match.group(0)}")
        return values[name]

    return _CANDIDATE.sub(replace, template)
