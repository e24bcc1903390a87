"""The system prompt, and the reminders that carry later changes of the session's setting.

The system prompt is deterministic for a given session (no clock in it), so the prefix estimate a new session
shows equals what its first request carries (U10). After the first request it is never rewritten: providers
cache a request's prefix (system prompt, tools, earlier messages), and one changed byte at the top makes every
later request pay for the whole context again. A change of mode or directories after that point reaches the
model as a reminder message appended to the conversation (`setting_reminder`).
"""

from __future__ import annotations

import platform

import msgspec

BASE = """You are ama, a coding agent working inside the user's project through their editor.

# How you work
- Understand before you change: read the relevant files and search the project first.
- Make the smallest change that solves the problem; keep the project's style.
- After changing code, run the project's tests or the narrowest useful check, and report the result honestly.
- For work with several steps, keep a todo list with the todo_write tool and update it as you go.
- Use the edit_file tool for changes to existing files (exact text replacement) and write_file for new files.
- Never invent file contents or command output. If something fails, say what failed and what you tried.
- Be concise. Use Markdown. Refer to code as `path:line`.

# Safety
- Stay inside the project unless the user asks otherwise; the editor asks the user before anything outside it.
- Do not run destructive commands (rm -rf, git reset --hard, force pushes) unless the user asked for exactly that.
"""


def system_prompt(cwd: str, additional_directories: list[str], mode: str) -> str:
    lines = [BASE, "# Environment", f"- Working directory: {cwd}"]
    for extra in additional_directories:
        lines.append(f"- Additional directory: {extra}")
    lines.append(f"- Platform: {platform.system()} {platform.machine()}")
    if mode == "read_only":
        lines.append("- The session is read-only: you may read and search, but not edit files or run commands.")
    elif mode == "plan":
        lines.append(f"- The session is in plan mode: {PLANNING}.")
    return "\n".join(lines) + "\n"


# What plan mode asks of the model; a helper agent of a task reads it too, hence "when you have it".
PLANNING = (
    "you may read, search and fetch, but not edit files or run commands (such calls are refused). Work out a "
    "plan instead of acting: investigate, keep the steps with todo_write, and answer with the plan. When it is "
    "ready, offer it with the exit_plan_mode tool (when you have it), which asks the user to switch to a mode "
    "that can edit"
)

# What each permission mode means for the model (the modes themselves: session/options.py).
MODE_RULES = {
    "manual": "you may edit files and run commands; the editor asks the user before each edit and each command",
    "accept_edits": "edits inside the project go ahead; the editor asks the user before each command",
    "plan": PLANNING,
    "read_only": "you may read and search, but not edit files or run commands (such calls are refused)",
    "full_access": "edits and commands go ahead without asking the user",
}


class Setting(msgspec.Struct, frozen=True):
    """What the system prompt tells the model that can change during a session (the working directory cannot:
    a session is loaded only in its own folder)."""

    mode: str
    additional_directories: tuple[str, ...] = ()


def setting_reminder(told: Setting, now: Setting) -> str:
    """The note that tells the model of a change the frozen system prompt cannot show."""
    lines = ["[A note from ama about this session, not written by the user]"]
    if now.mode != told.mode:
        rule = MODE_RULES.get(now.mode, "follow the user's instructions about edits and commands")
        lines.append(
            f"The permission mode is now `{now.mode}`: {rule}. This replaces what the system prompt or an earlier "
            "note said about the mode."
        )
    if now.additional_directories != told.additional_directories:
        listed = ", ".join(now.additional_directories) if now.additional_directories else "none"
        lines.append(f"The additional directories are now: {listed}. This replaces the list given before.")
    return "\n".join(lines)
