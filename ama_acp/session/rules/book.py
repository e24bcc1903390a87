"""The rules in force for one session: the config's and the project file's, judged on each call, and the
project rules "Always allow" adds and `/permissions remove N` takes away.

The project file is read again at each call, so a rule another session or process added holds at once.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence

from ama_acp.config import Config
from ama_acp.session.rules.rules import Call, Rule, Verdict, judge
from ama_acp.session.rules.shellparts import RESERVED, split_commands
from ama_acp.session.rules.sources import Loaded, config_rules, project_file, project_rules, report, write_project_rules
from ama_acp.tools.paths import ResolvedPath

_SUBCOMMAND = re.compile(r"[a-z][a-z0-9-]{0,63}")


class RuleBook:
    def __init__(self, from_config: Loaded, project_path: str | None, project: str) -> None:
        self._config = from_config
        self._path = project_path
        self._project = project
        report(from_config.problems)

    @classmethod
    def empty(cls) -> RuleBook:
        return cls(Loaded(), None, "")

    @classmethod
    def of(cls, cfg: Config, cwd: str) -> RuleBook:
        return cls(config_rules(cfg), project_file(cfg.data_dir, cwd) if cfg.data_dir else None, cwd)

    def _project_rules(self) -> Loaded:
        if self._path is None:
            return Loaded()
        loaded = project_rules(self._path)
        report(loaded.problems)
        return loaded

    def judge(
        self, name: str, args: Mapping[str, object], paths: Sequence[str], resolve: Callable[[str], ResolvedPath]
    ) -> tuple[Verdict, Rule] | None:
        rules = self._config.rules + self._project_rules().rules
        if not rules:
            return None
        command, url = args.get("command"), args.get("url")
        resolved = [resolve(p) for p in paths]
        call = Call(
            name,
            command=command if isinstance(command, str) else None,
            url=url if isinstance(url, str) else None,
            # Both the path as written and the real one behind its links: an allow must cover both, a deny either.
            paths=tuple((p, _relative(p, resolve)) for r in resolved for p in dict.fromkeys((r.path, r.abs_path))),
        )
        return judge(rules, call)

    def proposal(self, name: str, args: Mapping[str, object]) -> str | None:
        """The narrowest useful rule an "Always allow" of this call writes, or None (then the answer is the
        session's, as before): for a command read with certainty, its program and subcommand (`npm test *`),
        else the command as it is."""
        command = args.get("command")
        if self._path is None or name != "run_command" or not isinstance(command, str):
            return None
        split = split_commands(command)
        if not split.certain or len(split.commands) != 1:
            return None
        words = split.commands[0]
        if words[0] in RESERVED or "=" in words[0] or "*" in words:
            return None
        if len(words) >= 2 and _SUBCOMMAND.fullmatch(words[1]):
            pattern = " ".join(shlex.quote(w) for w in words[:2]) + " *"
        else:
            pattern = " ".join(shlex.quote(w) for w in words)
        rule = f"run_command({pattern})"
        if len(rule) > 200 or not rule.isprintable():
            return None
        return rule

    def add(self, verdict: Verdict, rule: str) -> None:
        """The rule written to the project file (the rules already there kept, a duplicate not added again)."""
        if self._path is None:
            return
        kept = _by_verdict(self._project_rules().rules)
        if rule not in kept[verdict]:
            kept[verdict].append(rule)
            write_project_rules(self._path, self._project, kept)

    def remove(self, number: int) -> str | None:
        """Removes the project rule of that number in `describe`'s list; the removed rule, or None."""
        listed = self._config.rules + self._project_rules().rules
        if not 1 <= number <= len(listed) or self._path is None:
            return None
        target = listed[number - 1]
        if target in self._config.rules:
            return None
        rules = [r for r in self._project_rules().rules if r != target]
        write_project_rules(self._path, self._project, _by_verdict(rules))
        return target.shown

    def describe(self) -> str:
        loaded = self._project_rules()
        listed = self._config.rules + loaded.rules
        lines = ["Permission rules (deny over ask over allow, in every mode):"]
        if not listed:
            lines.append('  none. Add them under [permissions] in the config, or choose "Always allow" on a command.')
        for n, rule in enumerate(listed, 1):
            lines.append(f"  {n}. {rule.verdict} `{rule.shown}` — {rule.origin}")
        problems = self._config.problems + loaded.problems
        if problems:
            lines.append("Ignored:")
            lines.extend(f"  {p}" for p in problems)
        if loaded.rules:
            lines.append("`/permissions remove N` removes a rule of this project.")
        return "\n".join(lines)


def _by_verdict(rules: list[Rule]) -> dict[Verdict, list[str]]:
    out: dict[Verdict, list[str]] = {"deny": [], "ask": [], "allow": []}
    for rule in rules:
        out[rule.verdict].append(rule.shown)
    return out


def _relative(path: str, resolve: Callable[[str], ResolvedPath]) -> str | None:
    """The path relative to the workspace when it is inside, else None (a relative pattern does not match it)."""
    resolved = resolve(path)
    if not resolved.inside:
        return None
    here = resolve(".")
    for root in dict.fromkeys((here.path.rstrip("/"), here.abs_path.rstrip("/"))):  # as written, and its real path
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
    return None
