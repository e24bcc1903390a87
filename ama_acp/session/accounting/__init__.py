"""A session's context figures: the meter as the wire and `/context` see it, the prompt cache, a loaded session's held figure."""
