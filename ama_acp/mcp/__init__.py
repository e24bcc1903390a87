"""The editor's MCP servers (ACP `mcpServers`): their specs, their tools, their results, their connections.

A layer below the sessions: nothing here knows ACP's wire or the JSON-RPC peer. `config`, `tools` and
`results` are plain data and import nothing heavy; only `connection` imports the `mcp` SDK, and `hub` imports
`connection` when it starts servers, so a session without servers never loads the SDK.
"""
