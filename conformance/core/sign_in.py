"""Which advertised auth method the suite may `authenticate` with by itself.

The suite signs in only where no person is needed. ACP's AuthMethod (id, name, description, `_meta`; `type`
absent for an `agent` method) says nothing about how a method signs in, so a method is taken to need a browser
or a person when its words say so — gemini-cli's `oauth-personal` ("Log in with Google") opens a browser and waits
for it, which hung every group that needed a session — or when its `_meta` carries a true flag named
`interactive` or `browser`. Such a method is tried only when the person names it (`--auth-method ID`).
"""

from __future__ import annotations

import re
from typing import Any

# Words that say a person must act: a browser sign-in, an OAuth flow, a device code, an account login.
_PERSON = re.compile(
    r"oauth|browser|device[ -]?code|interactive|log ?in with|sign ?in with|/login|\baccount\b", re.IGNORECASE
)


def needs_person(method: dict[str, Any]) -> bool:
    """Whether `method` (an advertised AuthMethod) needs a browser or a person to complete."""
    meta = method.get("_meta")
    if isinstance(meta, dict) and any(meta.get(k) is True for k in ("interactive", "browser")):
        return True
    words = " ".join(str(method.get(k) or "") for k in ("id", "name", "description"))
    return bool(_PERSON.search(words))


def agent_methods(init: dict[str, Any]) -> list[dict[str, Any]]:
    """The `agent` auth methods an initialize result advertises (no `type`: the client passes them to
    `authenticate`; a `terminal` one it must not)."""
    methods = init.get("authMethods")
    if not isinstance(methods, list):
        return []
    return [m for m in methods if isinstance(m, dict) and "type" not in m and isinstance(m.get("id"), str)]


def choose(methods: list[dict[str, Any]], asked: str | None) -> tuple[str | None, str]:
    """(the method id to authenticate with, "") — or (None, why none may be tried). `asked` (--auth-method) is
    taken as it is: the person chose it."""
    ids = [str(m["id"]) for m in methods]
    if asked is not None:
        return asked, ""
    if not ids:
        return None, "no agent auth method is advertised"
    usable = [str(m["id"]) for m in methods if not needs_person(m)]
    if not usable:
        return None, (
            f"the advertised auth methods {ids} need a browser or a person, so the suite does not try them: "
            "name one with --auth-method"
        )
    return usable[0], ""
