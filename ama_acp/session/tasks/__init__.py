"""Delegated work (`task`): the runner, a task's child loop or external agent, what the editor sees of it, stored tasks opened again."""
