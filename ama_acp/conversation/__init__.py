"""The conversation model: messages, their parts, usage figures and tool declarations.

The ground floor: it imports nothing of ama, and every other layer (context, providers, tools, the agent
loop, sessions) stands on it. `tests/unit/test_layers.py` keeps it that way.
"""
