"""`ama acp-client` at a terminal: the person's lines and keys, slash commands, sessions, a turn, OSC 7501."""
