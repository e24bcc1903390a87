"""Mode descriptions follow the UI language (docs/tools.md "Permission
modes"): a real `ama --mode acp` started by an editor in a Chinese locale describes its modes in Chinese, in the
session's modes and in the mode option; in any other locale, in English. Names stay display names."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.session.options import MODE_DESCRIPTIONS_ZH, MODE_NAMES, ui_language
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object

ENGLISH = {k: d for k, (_, d) in MODE_NAMES.items()}


async def _opened(tmp_path: Any, env: dict[str, str]) -> dict[str, Any]:
    ama = Ama(tmp_path)
    async with run_ama(ama, env=env, process=True) as conn:
        await conn.initialize()
        return as_object(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))


def _described(new: dict[str, Any]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    modes = {m["id"]: m["description"] for m in new["modes"]["availableModes"]}
    names = {m["id"]: m["name"] for m in new["modes"]["availableModes"]}
    option = next(o for o in new["configOptions"] if o["category"] == "mode")
    return modes, {o["value"]: o["description"] for o in option["options"]}, names


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LANGUAGE": ""}, MODE_DESCRIPTIONS_ZH),
        ({"LANG": "en_US.UTF-8", "LC_ALL": "zh_TW.UTF-8", "LANGUAGE": ""}, MODE_DESCRIPTIONS_ZH),  # LC_ALL first
        ({"LANG": "de_DE.UTF-8", "LC_ALL": "", "LANGUAGE": ""}, ENGLISH),  # a language ama has no words in
        ({"LANG": "C", "LC_ALL": "", "LANGUAGE": "zh_CN"}, ENGLISH),  # gettext ignores LANGUAGE under C
    ],
)
async def test_an_editor_in_a_chinese_locale_reads_the_modes_in_chinese(
    tmp_path: Any, env: dict[str, str], expected: dict[str, str]
) -> None:
    modes, option, names = _described(await _opened(tmp_path, env))
    assert modes == option == expected
    assert names == {k: n for k, (n, _) in MODE_NAMES.items()}


def test_language_is_read_as_gettext_reads_it() -> None:
    assert ui_language({"LANG": "zh_CN.UTF-8"}) == "zh"
    assert ui_language({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_HK"}) == "zh"  # LC_MESSAGES before LANG
    assert ui_language({"LC_ALL": "de_DE", "LANG": "zh_CN"}) == "en"  # LC_ALL first
    assert ui_language({"LANG": "de_DE.UTF-8", "LANGUAGE": "zh_CN:en"}) == "zh"  # LANGUAGE's first entry
    assert ui_language({"LANG": "C.UTF-8", "LANGUAGE": "zh_CN"}) == "en"  # ignored under the C locale
    assert ui_language({}) == "en"


@given(st.dictionaries(st.sampled_from(["LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE", "HOME"]), st.text(max_size=20)))
def test_any_locale_gives_one_of_the_two_languages_and_never_fails(environ: dict[str, str]) -> None:
    assert ui_language(environ) in ("en", "zh")


def test_every_mode_has_a_description_in_both_languages() -> None:
    assert set(MODE_DESCRIPTIONS_ZH) == set(MODE_NAMES)
    assert all(MODE_DESCRIPTIONS_ZH.values()) and all(d for _, d in MODE_NAMES.values())
