"""A task handed to an external ACP agent: its process and turn, its requests, updates and terminals, what the editor sees."""
