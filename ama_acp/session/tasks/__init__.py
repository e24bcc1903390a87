"""Delegated work (`task`): the runner, the workers that carry a task out (ama's own loop, an external agent),
what the editor sees of a task, stored tasks opened again."""
