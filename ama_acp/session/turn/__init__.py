"""A prompt turn's host: the agent loop's `TurnHost`, the session's tools, tool-call ids, compaction between requests."""
