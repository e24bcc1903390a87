"""What an editor would show, as text: updates rendered, content blocks, tool calls, the meter line."""
