"""Real MCP servers for the tests, written with the official SDK's server side (`mcp.server.mcpserver`).

`stdio_server` runs as `python -m tests.support.mcp_servers.stdio_server [--flags]`; `http_server` runs the same
tools over streamable HTTP or SSE on 127.0.0.1 in a subprocess (`running_http_server()` gives its URL).
"""
