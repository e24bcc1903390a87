"""ama: a coding agent for editors, spoken to over the Agent Client Protocol."""

__version__ = "0.1.0"
