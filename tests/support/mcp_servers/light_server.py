"""The test tools (toolset.py's) on a stdio MCP server written with the standard library only, so that starting
one costs a few tens of milliseconds of CPU instead of the second that importing the official SDK takes.

`python -m tests.support.mcp_servers.stdio_server [--flags]` serves with it (stdio_server.py has the flags;
`--sdk` there serves toolset.py's SDK server instead); it runs by path too (`python -S .../light_server.py`).

It answers as toolset.py's `MCPServer` does on the wire, message for message: the same `initialize` answer
(protocolVersion negotiated as the SDK does: the client's if it is a handshake version, else the newest one),
the same tools (names, descriptions, input schemas, annotations, results), argument errors as the SDK words them
(pydantic's text), JSON-RPC errors with the SDK's codes, messages and data, `notifications/tools/list_changed`
after `add_tool`, and `slow`'s markers: `<tag>.started`, and `<tag>.cancelled` on `notifications/cancelled` or
when stdin ends mid-call (as the SDK's task group cancels it). tests/unit/test_mcp_light_server.py sends the same
requests to both and compares the answers, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import os
import sys
import threading

TYPE_CHECKING = False  # typing is not imported at run time: it alone would cost a third of a start
if TYPE_CHECKING:
    from typing import Any

# The SDK's protocol versions reachable through `initialize` (mcp_types/version.py HANDSHAKE_PROTOCOL_VERSIONS).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
# toolset.PIXEL_PNG (a 1x1 transparent PNG), written out so nothing is computed at start.
PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAFUok9dAAAAAElFTkSuQmCC"
# The pydantic version in the links of its error messages (the wire test reads them without it).
PYDANTIC_DOCS = "https://errors.pydantic.dev/2.14/v/"

METHOD_NOT_FOUND, INVALID_PARAMS, CONNECTION_CLOSED = -32601, -32602, -32000
REQUIRED = object()  # a field without a default

# Each tool: description, annotations (or None), fields as (name, "string" | "number", default or REQUIRED).
# The order is the SDK's: the order toolset.py registers them.
TOOLS: dict[str, tuple[str, dict[str, bool] | None, list[tuple[str, str, Any]]]] = {
    "echo": ("Return the text as given.", {"readOnlyHint": True}, [("text", "string", REQUIRED)]),
    "pid": (
        "The server's process id (the tests check the process is gone after close).",
        {"readOnlyHint": True},
        [],
    ),
    "environ": (
        "The names of the server's environment variables, one a line, and LANG's value.",
        {"readOnlyHint": True},
        [],
    ),
    "write_note": (
        "Write a note file into the test directory.",
        {"readOnlyHint": False, "destructiveHint": False},
        [("name", "string", REQUIRED), ("text", "string", REQUIRED)],
    ),
    "slow": (
        "Sleep, leaving `<tag>.started` and (when cancelled) `<tag>.cancelled` in the test directory.",
        None,
        [("seconds", "number", 60.0), ("tag", "string", "slow")],
    ),
    "fail": ("A tool that reports its own failure (isError).", None, [("why", "string", "it failed on purpose")]),
    "crash": ("The process exits in the middle of the call.", None, []),
    "image": ("An image content item (and a line of text).", {"readOnlyHint": True}, []),
    "resource": ("An embedded text resource.", {"readOnlyHint": True}, []),
    "add_tool": (
        "Register another tool (`name`, an echo) and tell the client the list changed.",
        None,
        [("name", "string", REQUIRED)],
    ),
}
ADDED_FIELDS = [("text", "string", REQUIRED)]  # a tool add_tool registers: toolset.py's `extra(text)`


def _schema(function: str, fields: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """The input schema the SDK derives from the tool function's signature (pydantic's JSON schema)."""
    properties: dict[str, Any] = {}
    for name, kind, default in fields:
        prop: dict[str, Any] = {"title": name.replace("_", " ").title(), "type": kind}
        if default is not REQUIRED:
            prop = {"default": default, **prop}
        properties[name] = prop
    schema: dict[str, Any] = {"properties": properties}
    required = [name for name, _, default in fields if default is REQUIRED]
    if required:
        schema["required"] = required
    schema.update({"type": "object", "title": f"{function}Arguments"})
    return schema


def _truncated_repr(value: Any) -> str:
    text = repr(value)  # pydantic's input_value: the repr, its middle cut past 50 characters
    return text if len(text) <= 50 else text[:25] + "..." + text[-24:]


def _type_error(field: str, kind: str, value: Any, message: str) -> str:
    return (
        f"{field}\n  {message} [type={kind}, input_value={_truncated_repr(value)}, "
        f"input_type={type(value).__name__}]\n    For further information visit {PYDANTIC_DOCS}{kind}"
    )


def validate(function: str, fields: list[tuple[str, str, Any]], arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with their defaults, converted as pydantic's lax mode does; ValueError with the SDK's text
    (pydantic's ValidationError's) when they do not fit."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, kind, default in fields:
        if name not in arguments:
            if default is REQUIRED:
                errors.append(_type_error(name, "missing", arguments, "Field required"))
            else:
                values[name] = default
            continue
        value = arguments[name]
        if kind == "string":
            if isinstance(value, str):
                values[name] = value
            else:
                errors.append(_type_error(name, "string_type", value, "Input should be a valid string"))
        elif isinstance(value, str):
            try:
                values[name] = float(value)
            except ValueError:
                message = "Input should be a valid number, unable to parse string as a number"
                errors.append(_type_error(name, "float_parsing", value, message))
        else:
            try:
                if not isinstance(value, (int, float)):
                    raise TypeError
                values[name] = float(value)
            except (TypeError, OverflowError):
                errors.append(_type_error(name, "float_type", value, "Input should be a valid number"))
    if errors:
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''}"
        raise ValueError(f"{count} for {function}Arguments\n" + "\n".join(errors))
    return values


def _test_dir() -> str:
    # As toolset.py: MCP_TEST_DIR, else the system's temp directory (tempfile imported only then: it is slow).
    if folder := os.environ.get("MCP_TEST_DIR"):
        return folder
    import tempfile

    return tempfile.gettempdir()


def _path_name(name: str) -> str:
    """pathlib's `Path(name).name` without importing pathlib."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return parts[-1] if parts else ""


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _text(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class ToolFailed(Exception):
    """A tool raised: the SDK answers "Error executing tool NAME" (isError)."""


class LightServer:
    def __init__(self, name: str = "testserver") -> None:
        self.name = name
        self.tools: dict[str, dict[str, Any]] = {}
        for tool, (description, hints, fields) in TOOLS.items():
            self._register(tool, description, hints, fields, tool)
        self.added: dict[str, str] = {}  # a tool add_tool registered → its answer's prefix
        self.initialized = False
        self.slow_calls: dict[Any, tuple[threading.Event, list[str]]] = {}
        self._slow_lock = threading.Lock()
        self._out_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def _register(
        self,
        tool: str,
        description: str,
        annotations: dict[str, bool] | None,
        fields: list[tuple[str, str, Any]],
        function: str,
    ) -> None:
        listed: dict[str, Any] = {"name": tool, "description": description, "inputSchema": _schema(function, fields)}
        if annotations is not None:
            listed["annotations"] = annotations
        self.tools[tool] = {"listed": listed, "fields": fields, "function": function}

    def add_echo_tool(self, tool: str, description: str, prefix: str = "") -> None:
        """Another tool answering `<prefix><text>` (toolset.py's add_tool registers `extra`, prefix "NAME: ")."""
        if tool not in self.tools:  # the SDK keeps the first of two tools of one name
            self._register(tool, description, None, ADDED_FIELDS, "extra")
            self.added[tool] = prefix

    # --- the wire

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._out_lock:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except OSError:  # the client has gone (a broken pipe): nobody to tell
                pass

    def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def serve(self) -> None:
        """Read requests until stdin ends; then cancel the calls still running (their markers) and return."""
        for line in sys.stdin.buffer:
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                continue  # the SDK drops what is not a JSON-RPC message
            try:
                self.handle(message)
            except Exception as exc:  # a message this server did not foresee (the SDK drops it too) ends nothing
                sys.stderr.write(f"light_server: dropped a message: {exc!r}\n")
                sys.stderr.flush()
        with self._slow_lock:
            pending = list(self.slow_calls.values())
        for event, cancelled in pending:
            cancelled.append("eof")
            event.set()
        for thread in self._threads:
            thread.join()

    def handle(self, message: Any) -> None:
        # The SDK's envelope (mcp_types/jsonrpc.py): anything else is dropped without an answer. An id that is
        # not an int (strictly) or a string makes a request a notification.
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return
        method, params = message.get("method"), message.get("params")
        if not isinstance(method, str) or not (params is None or isinstance(params, dict)):
            return  # a response (this server asks nothing) or a malformed message
        request_id = message.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
            self.notification(method, params or {})
            return
        try:
            self.request(request_id, method, params)
        except _RpcError as exc:
            self.error(request_id, exc.code, exc.message, exc.data)

    def notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
                return  # not a request id: the SDK drops the notification
            with self._slow_lock:
                call = self.slow_calls.get(request_id)
            if call is not None:
                call[1].append("cancelled")
                call[0].set()

    def request(self, request_id: Any, method: str, params: dict[str, Any] | None) -> None:
        if method == "initialize":
            self.reply(request_id, self.initialize(params or {}))
            return
        handler = {
            "ping": self.ping,
            "tools/list": self.list_tools,
            "tools/call": self.call_tool,
            "resources/list": self.list_resources,
            "resources/templates/list": self.list_resource_templates,
            "resources/read": self.read_resource,
            "prompts/list": self.list_prompts,
            "prompts/get": self.get_prompt,
        }.get(method)
        if handler is None:  # completion/complete, logging/setLevel... have no handler on the SDK server either
            raise _RpcError(METHOD_NOT_FOUND, "Method not found", method)
        params = params or {}
        cursor = params.get("cursor")
        if method.endswith("/list") and cursor is not None and not isinstance(cursor, str):
            raise _invalid_params()
        if not self.initialized and method != "ping":
            raise _invalid_params()
        result = handler(request_id, params)
        if result is not None:
            self.reply(request_id, result)

    # --- the methods

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        version, info = params.get("protocolVersion"), params.get("clientInfo")
        if not (
            isinstance(version, str)
            and isinstance(params.get("capabilities"), dict)
            and isinstance(info, dict)
            and isinstance(info.get("name"), str)
            and isinstance(info.get("version"), str)
        ):
            raise _invalid_params()
        self.initialized = True
        return {
            "capabilities": {
                "prompts": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False},
            },
            "protocolVersion": version if version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE,
            "serverInfo": {"name": self.name, "version": ""},
        }

    def ping(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def list_tools(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [tool["listed"] for tool in self.tools.values()]}

    def list_resources(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"resources": []}

    def list_resource_templates(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"resourceTemplates": []}

    def list_prompts(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"prompts": []}

    def read_resource(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise _invalid_params()
        raise _RpcError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})

    def get_prompt(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise _invalid_params()
        raise _RpcError(0, f"Unknown prompt: {name}")

    def call_tool(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any] | None:
        tool, arguments = params.get("name"), params.get("arguments")
        if not isinstance(tool, str) or not (arguments is None or isinstance(arguments, dict)):
            raise _invalid_params()
        known = self.tools.get(tool)
        if known is None:
            return _text(f"Unknown tool: {tool}", is_error=True)
        try:
            values = validate(known["function"], known["fields"], arguments or {})
        except ValueError as exc:
            return _text(f"Error executing tool {tool}: {exc}", is_error=True)
        try:
            return self.run(request_id, tool, values)
        except Exception:
            return _text(f"Error executing tool {tool}", is_error=True)

    def run(self, request_id: Any, tool: str, values: dict[str, Any]) -> dict[str, Any] | None:
        if tool in self.added:
            return _text(self.added[tool] + values["text"])
        if tool == "echo":
            return _text(values["text"])
        if tool == "pid":
            return _text(str(os.getpid()))
        if tool == "environ":
            return _text("\n".join(sorted(os.environ)) + f"\nLANG={os.environ.get('LANG', '')}")
        if tool == "write_note":
            name = _path_name(values["name"])
            _write(os.path.join(_test_dir(), name), values["text"])
            return _text(f"wrote {name}")
        if tool == "slow":
            self.start_slow(request_id, values["seconds"], values["tag"])
            return None  # answered by its thread
        if tool == "fail":
            return _text(values["why"], is_error=True)
        if tool == "crash":
            sys.stderr.write("crash: exiting mid-call\n")
            sys.stderr.flush()
            os._exit(7)
        if tool == "image":
            return {
                "content": [
                    {"type": "text", "text": "a pixel"},
                    {"type": "image", "data": PIXEL_PNG, "mimeType": "image/png"},
                ],
                "isError": False,
            }
        if tool == "resource":
            contents = {"uri": "file:///notes/readme.txt", "mimeType": "text/plain", "text": "resource body"}
            return {"content": [{"type": "resource", "resource": contents}], "isError": False}
        if tool == "add_tool":
            added = values["name"]
            self.add_echo_tool(added, f"added at run time: {added}", prefix=f"{added}: ")
            self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return _text(f"added {added}")
        raise AssertionError(f"no code for the tool {tool}")

    def start_slow(self, request_id: Any, seconds: float, tag: str) -> None:
        # As toolset.py's `slow` on anyio: the marker first, then a wait (a negative one fails, as anyio.sleep
        # does), cut short by notifications/cancelled (the other marker, no answer) or by the end of stdin (the
        # marker, and the SDK's "Connection closed" error).
        started = os.path.join(_test_dir(), f"{tag}.started")
        _write(started, "started")
        if seconds < 0:
            raise ToolFailed(tag)
        event = threading.Event()
        cancelled: list[str] = []  # why, once cancelled
        with self._slow_lock:
            self.slow_calls[request_id] = (event, cancelled)

        def wait() -> None:
            try:
                event.wait(None if seconds != seconds or seconds > 1e9 else seconds)
                if cancelled:
                    _write(os.path.join(_test_dir(), f"{tag}.cancelled"), "cancelled")
                    if cancelled[0] == "eof":  # the SDK answers what was still running when its input ended
                        self.error(request_id, CONNECTION_CLOSED, "Connection closed")
                else:
                    self.reply(request_id, _text(f"slept {seconds}"))
            except Exception:
                self.reply(request_id, _text("Error executing tool slow", is_error=True))
            finally:
                with self._slow_lock:
                    self.slow_calls.pop(request_id, None)

        thread = threading.Thread(target=wait, daemon=True)
        self._threads.append(thread)
        thread.start()


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _invalid_params() -> _RpcError:
    # The SDK's answer to params that do not fit a method (and to a request before initialize).
    return _RpcError(INVALID_PARAMS, "Invalid request parameters", "")


def serve(name: str = "testserver") -> None:
    LightServer(name).serve()


if __name__ == "__main__":
    serve(sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "testserver")
