"""Where rules come from: the person's config (`[permissions] allow / ask / deny`) and ama's own file for the
project, `<data dir>/permissions/<hash of the project's real path>.toml`, which "Always allow" writes.

Never from the repository: a project cannot grant itself anything. A malformed rule is reported with its file and
line and left out; the others apply. A project file that is not a regular file (a link, a FIFO), too big, not
UTF-8 or not TOML is reported and ignored, never waited on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ama_acp import ownfiles
from ama_acp.config import Config
from ama_acp.session.rules.rules import VERDICTS, Rule, Verdict, parse_rule

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 256 * 1024
MAX_RULES = 1000  # a file's rules past this are left out (and said)
_REPORTED: set[str] = set()  # a process says each problem once, not once a session


@dataclass
class Loaded:
    rules: list[Rule] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def config_rules(cfg: Config) -> Loaded:
    """The `[permissions]` rules of the config, each with its line (the file is read again only to find lines)."""
    text = _read_text(cfg.config_path) if cfg.config_path else None
    origin = os.path.basename(cfg.config_path) or "config"
    loaded = Loaded()
    table = cfg.permissions
    for verdict in VERDICTS:
        _add(loaded, verdict, getattr(table, verdict), text, cfg.config_path or "config", origin)
    return loaded


def project_file(data_dir: str, cwd: str) -> str:
    digest = hashlib.sha256(os.fsencode(os.path.realpath(cwd))).hexdigest()[:32]
    return os.path.join(data_dir, "permissions", f"{digest}.toml")


def _data_dir_of(path: str) -> str:
    """The data dir a project file (`project_file`) lies in: below it no link is followed."""
    return os.path.dirname(os.path.dirname(path))


def project_rules(path: str) -> Loaded:
    """The rules "Always allow" wrote for the project; a file that cannot be read is a problem, not an error."""
    import tomllib

    loaded = Loaded()
    text = _read_text(path, loaded.problems, root=_data_dir_of(path))
    if text is None:
        return loaded
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        loaded.problems.append(f"{path}: {exc}; the file is ignored")
        return loaded
    for verdict in VERDICTS:
        entries = raw.get(verdict, [])
        if not isinstance(entries, list):
            loaded.problems.append(f"{path}: `{verdict}` must be a list of rules; it is ignored")
            continue
        _add(loaded, verdict, entries, text, path, "this project")
    return loaded


def _add(loaded: Loaded, verdict: Verdict, entries: list[object], text: str | None, path: str, origin: str) -> None:
    for i, entry in enumerate(entries):
        if len(loaded.rules) >= MAX_RULES:
            loaded.problems.append(f"{path}: more than {MAX_RULES} rules; the rest are ignored")
            return
        line = _line_of(text, entry) if text is not None else None
        at = f" line {line}" if line is not None else ""
        parsed = parse_rule(entry, verdict, f"{origin}{at}")
        if isinstance(parsed, Rule):
            loaded.rules.append(parsed)
            continue
        shown = repr(entry) if len(repr(entry)) <= 80 else repr(entry)[:79] + "…"
        where = f"line {line}" if line is not None else f"{verdict}[{i}]"
        loaded.problems.append(f"{path} ({where}): the {verdict} rule {shown} is ignored: {parsed}")


def _line_of(text: str, entry: object) -> int | None:
    """The first line holding the entry as a TOML string (tomllib keeps no positions)."""
    if not isinstance(entry, str):
        return None
    looks = re.compile("[\"']" + re.escape(entry) + "[\"']")
    return next((n for n, line in enumerate(text.split("\n"), 1) if looks.search(line)), None)


def _read_text(path: str, problems: list[str] | None = None, root: str | None = None) -> str | None:
    """The file's text, read through the one opener of ama's folders (no link followed below `root`, the file's
    own folder by default; a FIFO never waited on); None when missing or unusable."""
    try:
        data = ownfiles.read_file(Path(path), Path(root or os.path.dirname(path)), MAX_FILE_BYTES)
    except FileNotFoundError:
        return None
    except ownfiles.OwnFileRefused as exc:
        _problem(problems, f"{path}: {exc.kind}, not a regular file of at most {MAX_FILE_BYTES} bytes; it is ignored")
        return None
    except OSError as exc:
        _problem(problems, f"{path}: cannot be read ({exc.strerror}); it is ignored")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        _problem(problems, f"{path}: not UTF-8 text; it is ignored")
        return None


def _problem(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def report(problems: list[str]) -> None:
    """Each problem logged once a process (the log is the editor's agent log, and ama -p's stderr)."""
    for problem in problems:
        if problem not in _REPORTED:
            _REPORTED.add(problem)
            log.warning("permission rules: %s", problem)


def write_project_rules(path: str, project: str, rules: dict[Verdict, list[str]]) -> None:
    """The project file replaced at once (a temporary file renamed over it): a reader sees the old or the new."""
    lines = [
        '# ama\'s permission rules for this project, written by "Always allow" (docs/tools.md "Permission rules").',
        f"project = {_toml_string(project)}",
    ]
    for verdict in VERDICTS:
        if rules.get(verdict):
            lines.append(f"{verdict} = [")
            lines.extend(f"  {_toml_string(r)}," for r in rules[verdict])
            lines.append("]")
    # Atomic, through the one opener of ama's folders: a link planted on the way is refused, never written through.
    ownfiles.write_file(Path(path), Path(_data_dir_of(path)), ("\n".join(lines) + "\n").encode("utf-8"))


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped (json would leave DEL raw)."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
