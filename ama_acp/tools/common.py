"""Helpers the tools share: argument checking, display paths, diffs."""

from __future__ import annotations

import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, TypeVar, cast

import msgspec

from ama_acp.tools.base import FileDiff, JSONObject, JSONValue, Location, ToolArgs, ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import ResolvedPath, absolute
from ama_acp.tools.regular import special_root
from ama_acp.tools.workspace import FileStat, Workspace

# Above this size on either side a diff is not sent: in bytes of UTF-8, not characters (a diff's cost on the
# wire and in the editor is its encoded size). The one definition; test a diff with `diff_too_big`.
DIFF_LIMIT = 256 * 1024


# --- arguments -----------------------------------------------------------------------------------------


_Checked = TypeVar("_Checked")


def validate(schema: JSONObject, args: object, checked: type[_Checked]) -> _Checked:
    """Check `args` against the small JSON-schema subset the tools use and fill in defaults; the result has the
    shape `checked` (the tool's TypedDict, which says what its schema guarantees).

    Lenient where models are sloppy in harmless ways: `null` means "not given", "10" is accepted for an
    integer and "true" for a boolean. Strict about what changes meaning: missing or unknown fields, wrong
    types, values out of range.
    """
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolError("The arguments must be a JSON object.")
    # The check above is the schema's; the TypedDict restates it for the type checker.
    return cast(_Checked, _object(schema, args, ""))


def _subschema(value: JSONValue | None) -> JSONObject:
    """A schema's part that is itself a schema or a table of them (`properties`, `items`); {} when absent."""
    return value if isinstance(value, dict) else {}


def _object(schema: JSONObject, value: dict[str, object], where: str) -> dict[str, object]:
    props = _subschema(schema.get("properties"))
    out: dict[str, object] = {}
    for key, item in value.items():
        if key not in props:
            _check_extra(schema, props, f"{where}{key}")
            out[key] = item
        elif item is not None:
            out[key] = _value(_subschema(props[key]), item, f"{where}{key}")
    _check_required(schema, out, where)
    for key, sub in props.items():
        if key not in out and isinstance(sub, dict) and "default" in sub:
            out[key] = sub["default"]
    return out


def _check_required(schema: JSONObject, given: dict[str, object], where: str) -> None:
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if name not in given:
            raise ToolError(f"Missing required argument `{where}{name}`.")


def _check_extra(schema: JSONObject, props: JSONObject, where: str) -> None:
    """Refuse an argument the schema does not name, unless it allows additional ones."""
    if schema.get("additionalProperties", True) is False:
        allowed = ", ".join(f"`{k}`" for k in props) or "none"
        raise ToolError(f"Unknown argument `{where}`. Allowed: {allowed}.")


def _value(schema: JSONObject, value: object, where: str) -> object:
    kind = schema.get("type")
    check = _KIND_CHECKS.get(kind) if isinstance(kind, str) else None
    if check is not None:
        value = check(schema, value, where)
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        choices = ", ".join(f"`{c}`" for c in enum)
        raise ToolError(f"Argument `{where}` must be one of {choices}, not `{value}`.")
    _check_bounds(schema, value, where)
    return value


def _check_bounds(schema: JSONObject, value: object, where: str) -> None:
    # Bounds are given only to integers and numbers, which the kinds above have checked `value` to be.
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    if isinstance(minimum, int | float) and isinstance(value, int | float) and value < minimum:
        raise ToolError(f"Argument `{where}` must be at least {minimum}.")
    if isinstance(maximum, int | float) and isinstance(value, int | float) and value > maximum:
        raise ToolError(f"Argument `{where}` must be at most {maximum}.")


def _string(schema: JSONObject, value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ToolError(f"Argument `{where}` must be a string.")
    _check_text(value, where)
    return value


def _number(schema: JSONObject, value: object, where: str) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"Argument `{where}` must be a number.")
    return value


def _boolean(schema: JSONObject, value: object, where: str) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise ToolError(f"Argument `{where}` must be true or false.")
    return value


def _array(schema: JSONObject, value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise ToolError(f"Argument `{where}` must be an array.")
    min_items = schema.get("minItems", 0)
    if isinstance(min_items, int) and len(value) < min_items:
        raise ToolError(f"Argument `{where}` needs at least {min_items} item(s).")
    items = _subschema(schema.get("items"))
    if not items:
        return value
    return [_value(items, v, f"{where}[{i}]") for i, v in enumerate(value)]


def _whole(schema: JSONObject, value: object, where: str) -> int:
    return _integer(value, where)


def _nested(schema: JSONObject, value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ToolError(f"Argument `{where}` must be an object.")
    return _object(schema, value, f"{where}.")


# Each JSON-schema `type` the tools use, and the check that gives a value of it (a kind not listed: any value).
_KIND_CHECKS: dict[str, Callable[[JSONObject, object, str], object]] = {
    "string": _string,
    "integer": _whole,
    "number": _number,
    "boolean": _boolean,
    "array": _array,
    "object": _nested,
}


# Arguments that are file content, where a NUL byte is data; everywhere else (paths, commands, globs) a NUL
# cannot reach the OS (`ValueError: embedded null byte`) and is never what the model meant.
_NUL_ALLOWED = ("content", "old_text", "new_text", "pattern")


def _check_text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (JSON allows "\ud800"): no file name, command or file content can hold it.
        raise ToolError(f"Argument `{where}` is not valid Unicode text (it holds a lone surrogate).") from None
    if "\0" in value and where.rsplit(".", 1)[-1].split("[", 1)[0] not in _NUL_ALLOWED:
        raise ToolError(f"Argument `{where}` contains a NUL character, which no path or command can hold.")


def _integer(value: object, where: str) -> int:
    if isinstance(value, bool):
        raise ToolError(f"Argument `{where}` must be an integer.")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ToolError(f"Argument `{where}` must be an integer.")


def arg_str(args: object, key: str, default: str = "") -> str:
    """A string argument for titles and locations, which must never fail on bad input."""
    value = args.get(key) if isinstance(args, dict) else None
    return value if isinstance(value, str) else default


def closed_object(properties: JSONObject, *required: str) -> JSONObject:
    """The schema of a JSON object with these properties, `required` among them, and no others: a tool's
    arguments, or an item of a list argument (`validate` refuses any argument the schema does not name)."""
    return {"type": "object", "properties": properties, "required": [*required], "additionalProperties": False}


# The `path` argument of the tools that take one file, as the model sees it.
FILE_PATH_PARAM: JSONObject = {
    "type": "string",
    "description": "File path, absolute or relative to the working directory.",
}


def directory_path_param(what: str) -> JSONObject:
    """The optional `path` argument of a DirectoryTool, as the model sees it: `what` it names, and its default."""
    return {"type": "string", "description": f"{what} Default: the working directory."}


def path_locations(args: object, cwd: str, default: str | None = None, line: int | None = None) -> list[Location]:
    """The call's `path` argument as its one location (absolute; `default` when it has none, e.g. "." for a
    search of the working directory); no location when there is neither. Never fails on bad input."""
    path = arg_str(args, "path") or default
    return [Location(absolute(path, cwd), line)] if path else []


def arg_int(args: object, key: str) -> int | None:
    value = args.get(key) if isinstance(args, dict) else None
    try:
        return _integer(value, key) if value is not None else None
    except ToolError:
        return None


# --- paths and text ------------------------------------------------------------------------------------


def display_path(path: str, cwd: str) -> str:
    """Relative to the cwd when the path is under it, absolute otherwise."""
    path = os.path.normpath(path)
    cwd = os.path.normpath(cwd)
    if path == cwd:
        return "."
    prefix = cwd if cwd.endswith(os.sep) else cwd + os.sep
    return path[len(prefix) :] if path.startswith(prefix) else path


def short(text: str, limit: int = 60) -> str:
    """One line, at most `limit` characters, for titles; a cut one ends with a marker saying how much is left out
    ("… [+1,234 chars]"), so a title never passes for the whole."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    widest = len(f"… [+{len(line):,} chars]")  # the marker's length for the most that can be cut
    kept = max(0, limit - widest)
    return line[:kept] + f"… [+{len(line) - kept:,} chars]"


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    if word.endswith("y"):
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}es" if word.endswith(("s", "x", "ch", "sh")) else f"{n} {word}s"


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


# --- diffs ---------------------------------------------------------------------------------------------


def diff_too_big(old: str | None, new: str) -> bool:
    """Whether either side of a diff is over DIFF_LIMIT bytes (UTF-8): such a diff is not sent."""
    return len(new.encode("utf-8")) > DIFF_LIMIT or (old is not None and len(old.encode("utf-8")) > DIFF_LIMIT)


def make_diff(path: str, old: str | None, new: str) -> list[FileDiff]:
    """The diff for the editor, or none when either side is above the size limit."""
    return [] if diff_too_big(old, new) else [FileDiff(path=path, old_text=old, new_text=new)]


def first_changed_line(old: str | None, new: str) -> int:
    """The 1-based line where `new` starts to differ from `old` (1 for a new file)."""
    if not old:
        return 1
    n = min(len(old), len(new))
    i = 0
    # Compare in blocks first: files are often large and differ in one place.
    step = 4096
    while i + step <= n and old[i : i + step] == new[i : i + step]:
        i += step
    while i < n and old[i] == new[i]:
        i += 1
    if i == len(old) == len(new):
        return 1
    return old.count("\n", 0, i) + 1


def require_regular(resolved: ResolvedPath, st: FileStat | None, shown: str, verb: str) -> None:
    """Refuse a FIFO, device or socket, and anything under /proc, /sys, /dev, before it is opened: such a
    file can block a read forever or never end. `verb`: "read", "written", "edited", "searched"."""
    root = special_root(resolved.abs_path)
    if root is not None:
        raise ToolError(f"{shown} is under {root}, a kernel file system; only regular files can be {verb}.")
    if st is not None and not st.is_dir and not st.is_file:
        raise ToolError(f"{shown} is {st.special or 'not a regular file'}; only regular files can be {verb}.")


def refuse_git_internals(resolved: ResolvedPath, shown: str) -> None:
    """Writing inside a `.git` directory (or replacing a `.git` file) is not an edit: git runs programs named
    in its config and hooks (core.fsmonitor, hooks/pre-commit, ...), so such a write would be arbitrary code
    execution approved as a file edit. Such changes go through run_command, which always asks."""
    for path in (resolved.path, resolved.abs_path):
        parts = [p.lower() for p in path.split(os.sep)]
        if ".git" in parts:
            raise ToolError(
                f"{shown} is inside a .git directory (or is one). write_file and edit_file do not change git's "
                "internals: its config and hooks name programs git runs. If this change is really wanted, "
                "make it with run_command, which asks the person first."
            )


class Target(msgspec.Struct, frozen=True):
    """The file or directory a call's `path` names: as the policy resolved it, as the model is shown it, and
    what is there (None: nothing)."""

    resolved: ResolvedPath
    shown: str
    stat: FileStat | None

    @property
    def path(self) -> str:
        """Absolute, symlinks kept: the path the workspace is asked about."""
        return self.resolved.path


async def locate(ctx: ToolContext, path: str) -> Target:
    """The target of a tool that reads, lists or searches; what may be done with it is the tool's to check."""
    resolved = ctx.resolve(path)
    return Target(resolved, display_path(resolved.path, ctx.cwd), await ctx.workspace.stat(resolved.path))


async def file_to_change(ctx: ToolContext, path: str, verb: str) -> Target:
    """The target of write_file and edit_file (`verb`: "written", "edited"): refused inside .git, when it is a
    directory, and when it is anything but a regular file or a file not there yet."""
    resolved = ctx.resolve(path)
    shown = display_path(resolved.path, ctx.cwd)
    refuse_git_internals(resolved, shown)
    st = await ctx.workspace.stat(resolved.path)
    if st is not None and st.is_dir:
        raise ToolError(f"{shown} is a directory.")
    require_regular(resolved, st, shown, verb)
    return Target(resolved, shown, st)


async def missing_file_error(workspace: Workspace, path: str, cwd: str, hint: str = "") -> ToolError:
    """'File not found', with the closest names in its directory when there are any."""
    shown = display_path(path, cwd)
    message = f"File not found: {shown}."
    try:
        names = [e.name for e in await workspace.list_dir(os.path.dirname(path))]
    except OSError:
        names = []
    import difflib  # a miss's suggestions only: off the first answer's path

    close = difflib.get_close_matches(os.path.basename(path), names, n=3, cutoff=0.6)
    if close:
        folder = os.path.dirname(shown)
        message += " Did you mean: " + ", ".join(os.path.join(folder, c) for c in close) + "?"
    if hint:
        message += " " + hint
    return ToolError(message)


# A tool's `run` method: (self, args, ctx) -> ToolResult (`...`: whichever class `self` is).
_Run = TypeVar("_Run", bound=Callable[..., Awaitable[ToolResult]])


def os_errors_as_tool_errors(run: _Run) -> _Run:
    """Decorate a tool's `run`: an OSError (permission denied, read-only file system, ...) reaches the model
    as a plain sentence rather than a traceback."""

    @functools.wraps(run)
    async def wrapper(self: object, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        try:
            return await run(self, args, ctx)
        except OSError as e:
            where = f": {display_path(os.fsdecode(e.filename), ctx.cwd)}" if e.filename else ""
            raise ToolError(f"{e.strerror or e}{where}.") from None

    # The same signature as `run` (wraps copies its name and docstring; the cast says so to the checker).
    return cast(_Run, wrapper)


# A DirectoryTool's arguments as `validate` checked them: its own TypedDict.
_Args = TypeVar("_Args", bound=Mapping[str, object])


class DirectoryTool(ABC, Generic[_Args]):
    """What list_dir, find_files and search share: an optional `path` naming where the call looks (search also
    takes one file), the working directory when it names nothing. `run` checks the arguments and locates the
    path; the tool's own `look` does the rest."""

    parameters: JSONObject
    checked_as: type[_Args]  # what `validate` makes of arguments that meet `parameters`

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return path_locations(args, cwd, default=".")

    @staticmethod
    def where(args: ToolArgs) -> str:
        """For a title: " in PATH", or nothing when the call looks in the working directory."""
        path = arg_str(args, "path")
        return f" in {path}" if path else ""

    @os_errors_as_tool_errors
    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, self.checked_as)
        path = checked.get("path")
        target = await locate(ctx, path if isinstance(path, str) and path else ".")
        return await self.look(checked, target, ctx)

    @abstractmethod
    async def look(self, checked: _Args, target: Target, ctx: ToolContext) -> ToolResult:
        """The call, once its arguments are checked and its `path` is located (`target`)."""
