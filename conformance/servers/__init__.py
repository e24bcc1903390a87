"""The fake servers a run starts: the scripted model (two dialects), the stdio MCP server, the background HTTP server."""
