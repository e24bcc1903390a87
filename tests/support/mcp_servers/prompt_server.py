"""A stdio MCP server with prompts and resources, for the tests of MCP prompts as slash commands and of the
resource tools: `python -m tests.support.mcp_servers.prompt_server MODE`. The standard library only (a start
costs tens of milliseconds), so it can also send what the SDK never would.

Modes:
  serve       prompts `review` (file required, focus optional), `greet` (no arguments; a user and an assistant
              message), `attach` (an image and an embedded resource); resources `notes://readme` (text),
              `notes://logo` (a PNG blob), `notes://big` (`--mb` MB of text) and the template `notes://{name}`;
              the tool `add_prompt` (`name`) adds a prompt and sends `notifications/prompts/list_changed`
  huge        2000 prompts (2 KB descriptions, 30 arguments each) and 2000 resources (2 KB each)
  malformed   prompts/list, prompts/get and resources/read answer with results that are not MCP
  big-prompt  `review`'s prompts/get answers `--mb` MB of text
  sdk         `review`, `notes://readme` and `notes://{name}` served by the official SDK's server (interop)

`PROMPT_SERVER_LOG` (environment): a file that gets the method of every message received, one a line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAFUok9dAAAAAElFTkSuQmCC"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": {"type": "text", "text": text}}


class Server:
    def __init__(self, mode: str, mb: float) -> None:
        self.mode = mode
        self.mb = mb
        self.prompts: list[dict[str, Any]] = [
            {
                "name": "review",
                "description": "Review a file, with an optional focus.",
                "arguments": [
                    {"name": "file", "description": "The file to review.", "required": True},
                    {"name": "focus", "description": "What to look at."},
                ],
            },
            {"name": "greet", "description": "Say hello (no arguments)."},
            {"name": "attach", "description": "A prompt with an image and an embedded resource."},
        ]

    def listed_prompts(self) -> Any:
        if self.mode == "huge":
            # About 6 MB of JSON: far past any real list, under the 16 MiB a message may take (mcp/lines.py).
            arguments = [{"name": f"arg{i}", "required": i == 0} for i in range(30)]
            return [{"name": f"p{i}", "description": "d" * 2000, "arguments": arguments} for i in range(2000)]
        if self.mode == "malformed":
            return "not a list"
        return self.prompts

    def get_prompt(self, params: dict[str, Any]) -> Any:
        name, args = params.get("name"), params.get("arguments") or {}
        if self.mode == "malformed":
            return {"messages": [{"role": "narrator", "content": 7}]}
        if name == "review":
            if self.mode == "big-prompt":
                return {"messages": [_text("user", "BIG" + "x" * int(self.mb * 1_000_000))]}
            focus = args.get("focus", "everything")
            return {"description": "a review", "messages": [_text("user", f"Review {args.get('file')} for {focus}.")]}
        if name == "greet":
            return {"messages": [_text("user", "Hello from the prompt."), _text("assistant", "Hi, I was told so.")]}
        if name == "attach":
            return {
                "messages": [
                    {"role": "user", "content": {"type": "image", "data": PIXEL_PNG, "mimeType": "image/png"}},
                    {
                        "role": "user",
                        "content": {
                            "type": "resource",
                            "resource": {"uri": "notes://readme", "mimeType": "text/plain", "text": "README NOTES"},
                        },
                    },
                ]
            }
        if any(p["name"] == name for p in self.prompts):
            return {"messages": [_text("user", f"the added prompt {name}")]}
        raise KeyError(name)

    def listed_resources(self) -> Any:
        if self.mode == "huge":
            return [{"uri": f"notes://n{i}", "name": "n" * 1000, "description": "d" * 1000} for i in range(2000)]
        return [
            {"uri": "notes://readme", "name": "readme", "mimeType": "text/plain", "description": "The notes."},
            {"uri": "notes://logo", "name": "logo", "mimeType": "image/png"},
            {"uri": "notes://big", "name": "big", "mimeType": "text/plain"},
        ]

    def read(self, uri: str) -> Any:
        if self.mode == "malformed":
            return {"contents": 5}
        if uri == "notes://readme":
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "README NOTES: the project's notes."}]}
        if uri == "notes://logo":
            return {"contents": [{"uri": uri, "mimeType": "image/png", "blob": PIXEL_PNG}]}
        if uri == "notes://big":
            return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "B" * int(self.mb * 1_000_000)}]}
        if uri.startswith("notes://"):
            return {"contents": [{"uri": uri, "text": f"the note called {uri[8:]}"}]}
        raise KeyError(uri)

    def answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"prompts": {"listChanged": True}, "resources": {}, "tools": {}},
                "serverInfo": {"name": "prompts", "version": "1"},
            }
        if method == "tools/list":
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            return {"tools": [{"name": "add_prompt", "description": "Add a prompt.", "inputSchema": schema}]}
        if method == "tools/call":
            name = str((params.get("arguments") or {}).get("name", "added"))
            self.prompts.append({"name": name, "description": f"The added prompt {name}."})
            send({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
            return {"content": [{"type": "text", "text": f"added {name}"}]}
        if method == "prompts/list":
            return {"prompts": self.listed_prompts()}
        if method == "prompts/get":
            return self.get_prompt(params)
        if method == "resources/list":
            return {"resources": self.listed_resources()}
        if method == "resources/templates/list":
            return {"resourceTemplates": [{"uriTemplate": "notes://{name}", "name": "a note by name"}]}
        if method == "resources/read":
            return self.read(str(params.get("uri")))
        if method == "ping":
            return {}
        raise KeyError(method)


def serve_with_sdk() -> None:
    """`review` and the readme (and the template) as the official SDK's server offers them: the interop test's."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("prompts-sdk", log_level="WARNING")

    @server.prompt(description="Review a file, with an optional focus.")
    def review(file: str, focus: str = "everything") -> str:
        return f"Review {file} for {focus}."

    @server.resource("notes://readme", name="readme", description="The notes.", mime_type="text/plain")
    def readme() -> str:
        return "README NOTES: the project's notes."

    @server.resource("notes://{name}", name="a note by name")
    def note(name: str) -> str:
        return f"the note called {name}"

    server.run("stdio")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if mode == "sdk":
        serve_with_sdk()
        return
    mb = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    server = Server(mode, mb)
    log_path = os.environ.get("PROMPT_SERVER_LOG")
    for raw in sys.stdin:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        method, mid = message.get("method"), message.get("id")
        if log_path:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(f"{method}\n")
        if mid is None or not isinstance(method, str):
            continue
        try:
            result = server.answer(method, message.get("params") or {})
        except KeyError as exc:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": f"unknown: {exc}"}})
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": result})


if __name__ == "__main__":
    main()
