"""Session modes and config options (docs/tools.md "Permission modes"; model and thought level: docs/protocol.md),
and what a session is opened with (`SessionSetup`)."""

from __future__ import annotations

from typing import NamedTuple

from ama_acp.wire import types as w

MODE_NAMES = {
    "manual": ("Manual", "Asks before edits and commands"),
    "accept_edits": ("Accept edits", "Edits inside the project go ahead; commands ask"),
    "plan": ("Plan", "Reads and searches only: the agent answers with a plan, then asks to switch to edit"),
    "read_only": ("Read only", "No edits, no commands: reading and searching only"),
    "full_access": ("Full access", "Nothing asks"),
}

THOUGHT_LEVELS = {
    "off": "Off",
    "low": "Low",
    "medium": "Medium",
    "high": "High",
}
DEFAULT_THOUGHT_LEVEL = "off"  # a new session's; session/new answers it before the Session exists


class SessionSetup(NamedTuple):
    """What a session is opened with: its id and directories, the person's choices (from the config for a new
    session; as its file last set them for a load), and a loaded session's title and time."""

    session_id: str
    cwd: str
    additional_directories: list[str]
    mode: str
    model_id: str
    thought_level: str = DEFAULT_THOUGHT_LEVEL
    created_at: str | None = None  # None: now
    updated_at: str | None = None  # None: when it was created
    title: str | None = None


def mode_state(current: str) -> w.SessionModeState:
    return w.SessionModeState(
        current_mode_id=current,
        available_modes=[w.SessionMode(id=k, name=n, description=d) for k, (n, d) in MODE_NAMES.items()],
    )


def config_options(
    mode: str, model_id: str, models: list[tuple[str, str]], thought_level: str
) -> list[w.SessionConfigOption]:
    """All options, highest priority first (R98): model, thought level, mode."""
    return [
        w.SessionConfigOption(
            id="model",
            name="Model",
            category="model",
            current_value=model_id,
            options=[w.SessionConfigSelectOption(value=mid, name=name) for mid, name in models],
        ),
        w.SessionConfigOption(
            id="thought_level",
            name="Thinking",
            category="thought_level",
            current_value=thought_level,
            options=[w.SessionConfigSelectOption(value=k, name=v) for k, v in THOUGHT_LEVELS.items()],
        ),
        w.SessionConfigOption(
            id="mode",
            name="Permissions",
            category="mode",
            current_value=mode,
            options=[w.SessionConfigSelectOption(value=k, name=n, description=d) for k, (n, d) in MODE_NAMES.items()],
        ),
    ]
