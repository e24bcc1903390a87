"""What shapes ama to a person's or a team's workflow, read from their files as hostile input: project commands,
skills, hooks (docs/commands.md). Protocol-free: the session maps them to slash commands, the system prompt and
the tool runner."""
