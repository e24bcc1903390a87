"""shaping/commands.py and command_files.py: command files parsed and read as hostile input (docs/commands.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.session.file_commands import FileCommands
from ama_acp.shaping.command_files import PER_FOLDER, folders, load, signature
from ama_acp.shaping.commands import BODY_CHARS, CommandFileError, FileCommand, Format, command_name, expand, parse


def md(text: str, name: str = "c") -> FileCommand:
    return parse(text, name, "project", f".ama/commands/{name}.md", "ama")


def test_front_matter_fields_and_the_first_line_as_description() -> None:
    c = md("---\ndescription: Review\nargument-hint: <path>\n---\nLook at $1.\n")
    assert (c.description, c.hint, c.body) == ("Review", "<path>", "Look at $1.")
    bare = md("# Fix the issue\nFix #$ARGUMENTS\n")
    assert bare.description == "Fix the issue" and bare.hint == "arguments"
    assert md("Just do it\n").hint is None  # no placeholder: no input


def test_claude_front_matter_as_claude_writes_it() -> None:
    c = parse(
        "---\nallowed-tools: Bash(git add:*), Bash(git status:*)\nargument-hint: [pr-number] [priority]\n"
        "description: Create a commit\nmodel: claude-3-5-haiku\n---\nCommit $ARGUMENTS\n",
        "commit",
        "project",
        ".claude/commands/commit.md",
        "claude",
    )
    assert c.description == "Create a commit" and c.hint == "[pr-number] [priority]"
    assert md("---\nargument-hint: [message]\n---\n$1\n").hint == "[message]"  # a YAML list: the line as written


def test_gemini_toml() -> None:
    c = parse('description = "Commit"\nprompt = """\nCommit {{args}}\n"""\n', "git:commit", "project", "x", "gemini")
    assert (c.description, c.hint, c.body) == ("Commit", "arguments", "Commit {{args}}")
    assert expand(c, " fix typo ") == "Commit fix typo"


@pytest.mark.parametrize(
    ("text", "fmt", "line", "says"),
    [
        ("---\ndescription: ok\n  bad: x: y\n---\nbody\n", "ama", 3, "malformed YAML"),
        ("---\ndescription: [1, 2]\n---\nbody\n", "ama", 2, "must be text"),
        ("---\ndescription: x\n", "ama", 1, "never closed"),
        ("---\ndescription: x\n---\n\n", "ama", 1, "empty"),
        ('description = "x"\nprompt = \n', "gemini", 2, "malformed TOML"),
        ('description = "x"\n', "gemini", 1, "`prompt` is missing"),
        ('description = 3\nprompt = "p"\n', "gemini", 1, "`description` must be text"),
    ],
)
def test_malformed_files_name_their_line(text: str, fmt: str, line: int, says: str) -> None:
    with pytest.raises(CommandFileError) as caught:
        parse(text, "c", "project", "c", "gemini" if fmt == "gemini" else "ama")
    assert caught.value.line == line and says in str(caught.value)


def test_arguments_split_like_a_shell_without_running_anything() -> None:
    c = md("A=$1 B=$2 C=$3 all=$ARGUMENTS ten=$10")
    assert expand(c, 'one "two words" $(rm -rf ~)') == (
        'A=one B=two words C=$(rm all=one "two words" $(rm -rf ~) ten=$10'
    )
    assert expand(c, 'unbalanced "quote') == 'A=unbalanced B="quote C= all=unbalanced "quote ten=$10'
    assert expand(md("Fill $1"), "$ARGUMENTS") == "Fill $ARGUMENTS"  # an argument is never expanded again
    assert expand(md("No placeholder"), "extra words") == "No placeholder\n\nextra words"
    assert expand(md("No placeholder"), "  ") == "No placeholder"


def test_names() -> None:
    assert command_name(("git", "commit")) == "git:commit"
    assert command_name(("fix-issue.v2",)) == "fix-issue.v2"
    assert command_name(("bad name",)) is None and command_name(("",)) is None and command_name(()) is None


def test_a_huge_prompt_is_cut_with_a_marker() -> None:
    c = md("x" * (BODY_CHARS + 10))
    assert len(c.body) < BODY_CHARS + 200 and "[ama cut this command here" in c.body


def test_folder_bounds_precedence_and_collisions(tmp_path: Path) -> None:
    ama_dir = tmp_path / ".ama" / "commands"
    (ama_dir / "a" / "b" / "c" / "d").mkdir(parents=True)
    (ama_dir / "a" / "b" / "c" / "deep.md").write_text("three levels\n")
    (ama_dir / "a" / "b" / "c" / "d" / "deeper.md").write_text("four levels: not read\n")
    for n in range(PER_FOLDER + 5):
        (ama_dir / f"n{n:03}.md").write_text(f"number {n}\n")
    (ama_dir / "notes.txt").write_text("not a command\n")
    claude = tmp_path / ".claude" / "commands"
    claude.mkdir(parents=True)
    (claude / "n000.md").write_text("Claude's n000\n")
    person = tmp_path / "me"
    (person / "commands").mkdir(parents=True)
    (person / "commands" / "n001.md").write_text("mine\n")
    (person / "commands" / "solo.md").write_text("only mine\n")
    loaded = load(folders(str(tmp_path), str(person)))
    names = [c.name for c in loaded.commands]
    assert "a:b:c:deep" in names and not any("deeper" in n for n in names)
    assert len([n for n in names if n.startswith("n") and n[1:].isdigit()]) == PER_FOLDER + 2
    assert any("more than 200 command files" in str(p) for p in loaded.problems)
    files = FileCommands(str(tmp_path), str(person))
    assert files.refresh({"context"})
    table = {c.name: c.description for c in files.available()}
    assert table["n000"] == "number 0" and table["n001"] == "number 1" and table["solo"] == "only mine"
    told = files.untold()
    assert any(".claude/commands/n000.md: /n000 is already offered from .ama/commands/n000.md" in t for t in told)
    assert files.untold() == []  # told once
    assert not files.refresh({"context"})  # nothing changed: no new list


def test_signature_changes_with_a_write_and_a_new_file(tmp_path: Path) -> None:
    d = tmp_path / ".ama" / "commands"
    d.mkdir(parents=True)
    (d / "a.md").write_text("one\n")
    places = folders(str(tmp_path), None)
    first = signature(places)
    assert signature(places) == first
    (d / "b.md").write_text("two\n")
    second = signature(places)
    assert second != first
    os.utime(d / "a.md", ns=(1, 1))
    assert signature(places) != second


def test_expand_takes_the_name_then_any_whitespace(tmp_path: Path) -> None:
    d = tmp_path / ".ama" / "commands"
    d.mkdir(parents=True)
    (d / "go.md").write_text("Go $1 / $ARGUMENTS\n")
    files = FileCommands(str(tmp_path), None)
    files.refresh(set())
    out = files.expand(UserMessage(content=[TextPart("/go\nfirst second")]))
    assert out is not None and out[1].content[0] == TextPart("Go first / first second")
    assert files.expand(UserMessage(content=[TextPart("/gone x")])) is None
    assert files.expand(UserMessage(content=[TextPart("go x")])) is None


FORMATS: tuple[Format, ...] = ("ama", "claude", "gemini")
_TEXT = st.text(st.characters(codec="utf-8"), max_size=400)
_FRAGMENTS = st.sampled_from(
    ["---\n", "...\n", "description: ", "argument-hint: ", "[", "]", "{", "&a ", "*a", "$1", "$ARGUMENTS", "\n", "  ",
     'prompt = """', '"""', "{{args}}", "[table]\n", "= ", "!`ls`", "@file", "\r", "\ufeff"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(_FRAGMENTS, _TEXT), max_size=20), line=_TEXT)
def test_any_file_content_parses_or_is_a_command_file_error(parts: list[str], line: str) -> None:
    text = "".join(parts)
    for fmt in FORMATS:
        try:
            c = parse(text, "x", "project", "x", fmt)
        except CommandFileError as exc:
            assert exc.line >= 1
            continue
        assert c.name == "x" and c.body.strip()
        assert isinstance(expand(c, line), str)


@settings(max_examples=50, deadline=None)
@given(contents=st.lists(st.one_of(_FRAGMENTS, _TEXT), min_size=1, max_size=6))
def test_the_name_set_is_stable_whatever_the_files_hold(
    tmp_path_factory: pytest.TempPathFactory, contents: list[str]
) -> None:
    root = tmp_path_factory.mktemp("ws")
    d = root / ".ama" / "commands"
    d.mkdir(parents=True)
    for n, text in enumerate(contents):
        (d / f"c{n}.md").write_text(text, encoding="utf-8", errors="surrogatepass")
    files = FileCommands(str(root), None)
    files.refresh({"context"})
    names = [c.name for c in files.available()]
    again = FileCommands(str(root), None)
    again.refresh({"context"})
    assert [c.name for c in again.available()] == names and names[0] == "init"
    assert set(names) <= {"init"} | {f"c{n}" for n in range(len(contents))}
    assert not files.refresh({"context"})


def test_a_rewind_or_a_fork_mid_turn_takes_a_command_files_command_with_its_prompt() -> None:
    from ama_acp.conversation.messages import AssistantMessage
    from ama_acp.session.history.fork import completed_turns
    from ama_acp.session.store import entries as en
    from ama_acp.session.store.rewound_thread import apply_rewinds

    def said(text: str) -> en.MessageEntry:
        return en.MessageEntry(message=UserMessage(content=[TextPart(text)]))

    first: list[en.Entry] = [
        en.CommandEntry(text="/review 1"),
        en.TitleEntry(title="Review PR #1"),
        said("Review PR #1"),
        en.MessageEntry(message=AssistantMessage(content=[TextPart("done")])),
        en.TurnEntry(stop_reason="end_turn"),
    ]
    second: list[en.Entry] = [en.CommandEntry(text="/review 2"), said("Review PR #2")]
    rewound = apply_rewinds(
        [
            *first,
            *second,
            en.TurnEntry(stop_reason="end_turn"),
            en.CommandEntry(text="/rewind 2"),
            en.RewindEntry(prompt=2, message_index=2),
        ]
    )
    assert [e.text for e in rewound if isinstance(e, en.CommandEntry)] == ["/review 1", "/rewind 2"]
    assert completed_turns(first + second) == first  # the running turn's command goes with its prompt
    assert [type(e) for e in apply_rewinds([*first, en.RewindEntry(prompt=1, message_index=0)])] == [en.TitleEntry]


@settings(max_examples=200, deadline=None)
@given(typed=_TEXT)
def test_any_prompt_text_expands_or_passes_without_an_exception(
    tmp_path_factory: pytest.TempPathFactory, typed: str
) -> None:
    root = tmp_path_factory.mktemp("ws")
    d = root / ".ama" / "commands"
    d.mkdir(parents=True)
    (d / "go.md").write_text("Go $1 $9 $ARGUMENTS\n")
    files = FileCommands(str(root), None)
    files.refresh(set())
    for text in (typed, "/go " + typed, "/init" + typed):
        out = files.expand(UserMessage(content=[TextPart(text)]))
        if out is not None:
            assert out[0] == text and isinstance(out[1].content[0], TextPart)
