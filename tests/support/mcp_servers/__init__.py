"""Real MCP servers for the tests.

`stdio_server` runs as `python -m tests.support.mcp_servers.stdio_server [--flags]`: toolset.py's tools served by
`light_server` (the standard library only, a start of tens of milliseconds of CPU), or with `--sdk` by the
official SDK's server side (`mcp.server.mcpserver`, toolset.py), which answers the same on the wire
(tests/unit/test_mcp_light_server.py); `http_server` runs the SDK's server over streamable HTTP or SSE on
127.0.0.1 in a thread of the test's process, or a subprocess (`running_http_server()` gives its URL);
`hostile_server` sends what no SDK would.
"""
