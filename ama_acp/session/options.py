"""Session modes and config options (docs/tools.md "Permission modes"; model and thought level: docs/protocol.md),
and what a session is opened with (`SessionSetup`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from ama_acp.wire import types as w

MODE_NAMES = {
    "manual": ("Manual", "Asks before edits and commands"),
    "accept_edits": ("Accept edits", "Edits inside the project go ahead; commands ask"),
    "plan": ("Plan", "Reads and searches only: the agent answers with a plan, then asks to switch to edit"),
    "read_only": ("Read only", "No edits, no commands: reading and searching only"),
    "full_access": ("Full access", "Nothing asks"),
}

# The descriptions in the other UI language ama speaks: Chinese, the language of the documents ama was designed
# from (docs/seeds.md). Names stay as they are: they are display names (a mode's name is what a person types and
# reads in the docs, whatever the language of the editor).
MODE_DESCRIPTIONS_ZH = {
    "manual": "编辑和命令都先询问",
    "accept_edits": "项目内的编辑直接进行；命令先询问",
    "plan": "只读取和搜索：智能体给出计划，再询问是否切换到编辑",
    "read_only": "不编辑、不运行命令：只读取和搜索",
    "full_access": "什么都不询问",
}


def ui_language(environ: Mapping[str, str] = os.environ) -> str:
    """The language of the person's interface, from the locale their editor started ama with, as gettext reads it
    (LANGUAGE's first entry, then LC_ALL, LC_MESSAGES, LANG; ACP itself carries no locale): "zh" for Chinese,
    "en" for anything else (ama's descriptions exist in these two)."""
    locale = next((environ[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(k)), "")
    first = environ.get("LANGUAGE", "").split(":")[0]
    if first and locale.split(".")[0] not in ("C", "POSIX"):  # gettext ignores LANGUAGE under the C locale
        locale = first
    return "zh" if locale.lower().replace("-", "_").split("_")[0].split(".")[0] == "zh" else "en"


def mode_description(mode: str, language: str | None = None) -> str:
    """`mode`'s description in the person's UI language (docs/tools.md "Permission modes")."""
    if (language or ui_language()) == "zh":
        return MODE_DESCRIPTIONS_ZH[mode]
    return MODE_NAMES[mode][1]


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
    language = ui_language()
    return w.SessionModeState(
        current_mode_id=current,
        available_modes=[
            w.SessionMode(id=k, name=n, description=mode_description(k, language)) for k, (n, _) in MODE_NAMES.items()
        ],
    )


def config_options(
    mode: str, model_id: str, models: list[tuple[str, str]], thought_level: str
) -> list[w.SessionConfigOption]:
    """All options, highest priority first (R98): model, thought level, mode."""
    language = ui_language()
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
            options=[
                w.SessionConfigSelectOption(value=k, name=n, description=mode_description(k, language))
                for k, (n, _) in MODE_NAMES.items()
            ],
        ),
    ]
