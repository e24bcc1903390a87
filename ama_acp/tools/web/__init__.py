"""web_fetch: the addresses it may reach, one GET at a time, the page made Markdown."""
