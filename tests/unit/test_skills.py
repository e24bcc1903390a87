"""shaping/skills.py and shaping/skill_tool.py: skills found in their three places, read as hostile input
(docs/commands.md "Skills", docs/tools.md "The tools")."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.agent.inventory import SKILLS, build_inventory
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage
from ama_acp.errors import ToolError
from ama_acp.shaping import skill_tool, skills
from ama_acp.shaping.skill_tool import BODY_BYTES, SkillTool, list_files, read_beside
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import LocalWorkspace


def make(folder: Path, name: str, text: str | None = None) -> Path:
    d = folder / name
    d.mkdir(parents=True, exist_ok=True)
    body = text if text is not None else f"---\nname: {name}\ndescription: Use {name} for {name} work.\n---\n# {name}\n"
    (d / "SKILL.md").write_text(body, encoding="utf-8")
    return d


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    project, config = tmp_path / "proj", tmp_path / "config"
    project.mkdir()
    config.mkdir()
    return project, config


def test_three_places_in_order_of_precedence_a_collision_reported(places: tuple[Path, Path]) -> None:
    project, config = places
    make(project / ".ama" / "skills", "review")
    make(project / ".claude" / "skills", "review", "---\ndescription: the claude one\n---\nbody\n")
    make(project / ".claude" / "skills", "deploy")
    make(config / "skills", "deploy", "---\ndescription: mine\n---\n")
    make(config / "skills", "notes")
    found = skills.load(str(project), str(config))
    assert [(s.name, s.source) for s in found.skills] == [
        ("deploy", "claude"),
        ("notes", "person"),
        ("review", "project"),
    ]
    review = found.skill("review")
    assert review is not None and review.description == "Use review for review work."
    texts = [p.text() for p in found.problems]
    assert len(texts) == 2 and all("is already defined by" in t for t in texts)
    block = found.block
    assert block.startswith("\n# Skills\n") and "- `notes`: Use notes for notes work.\n" in block


def test_no_skills_no_block(places: tuple[Path, Path]) -> None:
    project, config = places
    found = skills.load(str(project), str(config))
    assert found.skills == () and found.block == "" and found.problems == ()
    assert skills.load(str(project), None).skills == ()


def test_malformed_front_matter_names_the_file_and_line_and_is_skipped(places: tuple[Path, Path]) -> None:
    project, config = places
    base = project / ".ama" / "skills"
    make(base, "good")
    make(base, "broken", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    make(base, "Bad_Name", "---\ndescription: x\nname: Bad_Name\n---\n")
    make(base, "nodesc", "---\nname: nodesc\n---\nbody\n")
    make(base, "alias", "---\na: &x [1]\nb: *x\n---\n")
    (base / "README.md").write_text("not a skill\n", encoding="utf-8")
    (base / "empty").mkdir()
    found = skills.load(str(project), str(config))
    assert [s.name for s in found.skills] == ["good"]
    by_file = {Path(p.path).parent.name: p for p in found.problems}
    assert set(by_file) == {"broken", "Bad_Name", "nodesc", "alias"}
    assert by_file["broken"].line is not None and by_file["broken"].line >= 3
    assert by_file["alias"].line == 3 and "aliases" in by_file["alias"].message
    assert "is not a skill name" in by_file["Bad_Name"].message and by_file["Bad_Name"].line == 3
    assert "no `description`" in by_file["nodesc"].message
    assert by_file["broken"].text().startswith(str(base / "broken" / "SKILL.md") + ":")


def test_a_name_defaults_to_the_folder_and_a_long_description_is_cut(places: tuple[Path, Path]) -> None:
    project, config = places
    make(project / ".ama" / "skills", "plain", "---\ndescription: " + "d" * 2000 + "\n---\n")
    (found,) = skills.load(str(project), str(config)).skills
    assert found.name == "plain" and len(found.description) < 1100 and found.description.endswith("[+976 chars]")


def test_links_out_of_the_project_are_refused_the_persons_own_followed(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    project, config = places
    outside = tmp_path / "outside"
    make(outside, "secret")
    base = project / ".ama" / "skills"
    base.mkdir(parents=True)
    (base / "secret").symlink_to(outside / "secret")  # a skill folder linked out of the project
    (project / ".claude").mkdir()
    (project / ".claude" / "skills").symlink_to(outside)  # the whole place linked out
    inner = make(base, "inner")
    (base / "alias").symlink_to(inner)  # a link inside the project: followed
    (config / "skills").mkdir()
    (config / "skills" / "mine").symlink_to(outside / "secret")  # the person's own folder: their links count
    found = skills.load(str(project), str(config))
    names = {s.name: s.source for s in found.skills}
    assert names == {"inner": "project", "secret": "person"}
    texts = " ".join(p.text() for p in found.problems)
    assert "links outside" in texts and str(project / ".claude" / "skills") in texts
    assert "is already defined by" in texts  # `alias` names itself `inner`


def test_a_fifo_skill_file_is_refused_without_blocking(places: tuple[Path, Path]) -> None:
    project, config = places
    d = project / ".ama" / "skills" / "pipe"
    d.mkdir(parents=True)
    os.mkfifo(d / "SKILL.md")
    found = skills.load(str(project), str(config))
    assert found.skills == () and "FIFO" in found.problems[0].message


def test_at_most_max_skills(places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    project, config = places
    monkeypatch.setattr(skills, "MAX_SKILLS", 3)
    for n in range(5):
        make(project / ".ama" / "skills", f"s{n}")
    found = skills.load(str(project), str(config))
    assert [s.name for s in found.skills] == ["s0", "s1", "s2"]
    assert "more than 3 skills" in found.problems[-1].message


def run(tool: SkillTool, **args: object) -> str:
    async def go() -> str:
        return (await tool.run(dict(args), ToolContext(LocalWorkspace(), "/", PathPolicy(["/"])))).text

    return anyio.run(go)


def test_the_tool_returns_the_body_and_the_files_beside_it(places: tuple[Path, Path], tmp_path: Path) -> None:
    project, config = places
    d = make(project / ".ama" / "skills", "pdf", "---\nname: pdf\ndescription: PDFs\n---\n\n# PDF\nRun scripts/x.py\n")
    (d / "scripts").mkdir()
    (d / "scripts" / "x.py").write_text("print(1)\n", encoding="utf-8")
    (d / "ref.md").write_text("reference\n", encoding="utf-8")
    (tmp_path / "far").write_text("FAR AWAY\n", encoding="utf-8")
    (d / "far.md").symlink_to(tmp_path / "far")
    os.mkfifo(d / "pipe")
    tool = SkillTool(skills.load(str(project), str(config)))
    text = run(tool, name="pdf")
    assert text.startswith(f'<skill name="pdf" folder="{d}">\n# PDF\nRun scripts/x.py\n</skill>')
    assert "description: PDFs" not in text  # the front matter is the system prompt's
    assert "- ref.md\n" in text and "- scripts/x.py\n" in text and "- far.md (a link)\n" in text
    assert "pipe" not in text and "FAR AWAY" not in text
    assert run(tool, name="pdf", file="scripts/x.py") == "print(1)\n"
    for bad, says in [
        ("../pdf/ref.md", "inside the skill's folder"),
        ("/etc/passwd", "inside the skill's folder"),
        ("far.md", "links outside"),
        ("pipe", "FIFO"),
        ("scripts", "is a folder"),
        ("missing.md", "cannot be read"),
    ]:
        with pytest.raises(ToolError, match=says):
            run(tool, name="pdf", file=bad)
    with pytest.raises(ToolError, match="must be a string"):
        run(tool, name="pdf", file=5)
    assert run(tool, name="pdf", file=None).startswith("<skill")  # null: not given
    with pytest.raises(ToolError, match="There is no skill 'nope'. The skills of this session: pdf"):
        run(tool, name="nope")
    assert tool.title({"name": "pdf"}) == "Load skill pdf" and tool.title({"name": 3}) == "Load skill"


def test_an_enormous_body_or_file_is_cut_with_a_marker(places: tuple[Path, Path]) -> None:
    project, config = places
    d = make(project / ".ama" / "skills", "big", "---\ndescription: big\n---\n" + "é" * BODY_BYTES)
    (d / "huge.txt").write_text("z" * (BODY_BYTES * 2), encoding="utf-8")
    (d / "bin").write_bytes(b"\x00\x01\x02")
    tool = SkillTool(skills.load(str(project), str(config)))
    body = run(tool, name="big")
    assert "[ama cut this file here: only its first 256 KiB are shown.]" in body
    assert len(body.encode()) < BODY_BYTES + 4096
    huge = run(tool, name="big", file="huge.txt")
    assert huge.endswith("KiB are shown.]") and len(huge) < BODY_BYTES + 200
    assert "binary" in run(tool, name="big", file="bin")


def test_the_list_of_files_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skill_tool, "MAX_LISTED", 5)
    for n in range(9):
        (tmp_path / f"f{n}").write_text("x", encoding="utf-8")
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    files = list_files(str(tmp_path))
    assert len(files) == 6 and files[-1].startswith("… more files not listed")


def test_the_inventory_keeps_which_skills_were_loaded() -> None:
    calls = [
        ToolCallPart("c1", "skill", '{"name": "pdf"}'),
        ToolCallPart("c2", "skill", '{"name": "pdf", "file": "ref.md"}'),
        ToolCallPart("c3", "skill", '{"name": "nope"}'),
    ]
    messages: list[Message] = [
        AssistantMessage(content=[*calls]),
        ToolResultMessage("c1", "skill", [TextPart("body")]),
        ToolResultMessage("c2", "skill", [TextPart("ref")]),
        ToolResultMessage("c3", "skill", [TextPart("There is no skill")], is_error=True),
    ]
    text = build_inventory(messages)
    assert f"## {SKILLS} (2)\n- `pdf`\n- `pdf: ref.md`\n" in text
    assert SKILLS not in build_inventory(messages[:1])  # no skill loaded: the inventory as it always read


SKILL_TEXT = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda meta, body: f"---\n{meta}\n---\n{body}",
        st.text(st.characters(blacklist_categories=["Cs"]), max_size=200),
        st.text(max_size=100),
    ),
    st.builds(
        lambda name, desc: f"---\nname: {name}\ndescription: {desc}\n---\nbody",
        st.text(max_size=70),
        st.text(max_size=60),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(SKILL_TEXT, min_size=1, max_size=3), raw=st.binary(max_size=200))
def test_any_skill_file_loads_or_is_reported_never_an_exception(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], raw: bytes
) -> None:
    root = tmp_path_factory.mktemp("hyp")
    base = root / ".ama" / "skills"
    for n, text in enumerate(texts):
        make(base, f"s{n}", text.replace("\0", ""))
    (base / "raw").mkdir()
    (base / "raw" / "SKILL.md").write_bytes(raw)
    found = skills.load(str(root), None)
    assert len(found.skills) + len(found.problems) <= len(texts) + 1
    tool = SkillTool(found)
    for s in found.skills:
        assert skills.NAME_CHARS >= len(s.name) > 0 and "\n" not in s.description
        assert isinstance(read_beside(s, "SKILL.md"), str)
        assert run(tool, name=s.name).startswith(f'<skill name="{s.name}"')


ARGS = st.dictionaries(
    st.sampled_from(["name", "file", "other"]),
    st.one_of(st.none(), st.integers(), st.text(max_size=40), st.sampled_from(["pdf", "ref.md", "../x", "/", "."])),
    max_size=3,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=ARGS)
def test_any_arguments_give_a_result_or_a_tool_error(tmp_path: Path, args: dict[str, object]) -> None:
    d = tmp_path / ".ama" / "skills" / "pdf"
    if not d.exists():
        make(tmp_path / ".ama" / "skills", "pdf")
        (d / "ref.md").write_text("ref\n", encoding="utf-8")
    tool = SkillTool(skills.load(str(tmp_path), None))
    assert isinstance(tool.title(args), str)
    try:
        assert isinstance(run(tool, **args), str)
    except ToolError:
        pass
