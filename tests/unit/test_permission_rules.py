"""Permission rules: the command line split, the rule syntax, and deny over ask over allow."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.session.rules.rules import Call, Rule, Verdict, judge, parse_rule
from ama_acp.session.rules.shellparts import split_commands
from tests.support.hypothesis_profiles import examples


def rule(text: str, verdict: Verdict = "allow") -> Rule:
    parsed = parse_rule(text, verdict, "test")
    assert isinstance(parsed, Rule), parsed
    return parsed


def run(command: str, *rules: Rule) -> str | None:
    found = judge(list(rules), Call("run_command", command=command))
    return None if found is None else found[0]


@pytest.mark.parametrize(
    ("line", "commands", "certain"),
    [
        ("npm test", [["npm", "test"]], True),
        ("npm test && rm -rf ~", [["npm", "test"], ["rm", "-rf", "~"]], True),
        ("a;b||c|d&e\nf", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"]], True),
        ("echo 'a;b' \"c|d\" e\\;f", [["echo", "a;b", "c|d", "e;f"]], True),
        ("echo ''", [["echo", ""]], True),
        ("echo $(rm x)", [["echo", "$(rm", "x)"]], False),
        ('echo "$(rm x)"', [["echo", "$(rm x)"]], False),
        ("echo `rm x`", [["echo", "`rm", "x`"]], False),
        ("(rm x)", [["(rm", "x)"]], False),
        ("npm test > out", [["npm", "test", ">", "out"]], False),
        ("cat <<EOF", [["cat", "<<EOF"]], False),
        ("echo 'open", [["echo", "open"]], False),
        ('echo "open', [["echo", "open"]], False),
        ("npm test # comment", [["npm", "test", "#", "comment"]], False),
        ("{ rm x; }", [["{", "rm", "x"], ["}"]], False),
        ("echo a\\\nb", [["echo", "a\nb"]], False),
        ("echo $'\\''; rm -rf ~ #'", None, False),
    ],
)
def test_a_line_is_split_into_its_simple_commands(line, commands, certain):
    split = split_commands(line)
    if commands is not None:
        assert split.commands == commands
    assert split.certain is certain


def test_a_command_rule_matches_word_by_word():
    npm = rule("run_command(npm test *)")
    assert run("npm test", npm) == "allow"
    assert run("npm test --watch 'a b'", npm) == "allow"
    assert run("npm  test;npm test x", npm) == "allow"
    assert run("npm testx", npm) is None
    assert run("npm run build", npm) is None
    assert run("npm test && rm -rf ~", npm) is None
    assert run("npm test $(rm -rf ~)", npm) is None
    assert run("npm test > ~/.bashrc", npm) is None
    assert run("PATH=. npm test", npm) is None
    exact = rule("run_command(git status)")
    assert run("git status", exact) == "allow"
    assert run("git status -s", exact) is None


def test_a_deny_holds_for_any_part_even_one_the_split_could_not_read():
    rm = rule("run_command(rm *)", "deny")
    anything = rule("run_command", "allow")
    assert run("npm test && rm -rf ~", rm, anything) == "deny"
    assert run("if true; then rm -rf ~; fi", rm, anything) == "deny"
    assert run("FOO=1 rm x", rm, anything) == "deny"
    assert run("echo $(date); rm x", rm, anything) == "deny"
    assert run("npm test", rm, anything) == "allow"
    assert run("sudo env A=1 /usr/bin/rm -rf ~", rm, anything) == "deny"
    assert run("command rm x", rm, anything) == "deny"


def test_deny_wins_over_ask_and_ask_over_allow():
    allow, ask, deny = rule("run_command(git *)"), rule("run_command(git push *)", "ask"), rule("run_command")
    assert run("git push", allow, ask) == "ask"
    assert run("git log", allow, ask) == "allow"
    assert run("git log", allow, ask, rule("run_command", "deny")) == "deny"
    assert deny.pattern is None


def test_path_rules_match_the_resolved_path(tmp_path):
    src = rule("edit_file(src/**)")
    call = Call("edit_file", paths=((str(tmp_path / "src/a/b.py"), "src/a/b.py"),))
    assert judge([src], call) == ("allow", src)
    outside = Call("edit_file", paths=((str(tmp_path / "src/a/b.py"), "src/a/b.py"), ("/etc/passwd", None)))
    assert judge([src], outside) is None  # an allow must cover every path
    ssh = rule("read_file(~/.ssh/**)", "deny")
    key = os.path.expanduser("~/.ssh/id_rsa")
    assert judge([ssh], Call("read_file", paths=((key, None),))) == ("deny", ssh)
    assert judge([ssh], Call("edit_file", paths=((key, None),))) is None  # another tool
    env = rule("read_file(.env)", "deny")
    assert judge([env], Call("read_file", paths=(("/w/a/.env", "a/.env"),))) == ("deny", env)


def test_a_host_rule_is_that_host_on_its_default_port():
    docs = rule("web_fetch(docs.python.org)")
    local = rule("web_fetch(localhost:8080)")

    def fetch(url: str) -> object:
        return judge([docs, local], Call("web_fetch", url=url))

    assert fetch("https://docs.python.org/3/") == ("allow", docs)
    assert fetch("http://DOCS.python.org./x") == ("allow", docs)
    assert fetch("https://docs.python.org:443/x") == ("allow", docs)
    assert fetch("https://DOCS.python.org:8443/x") is None  # another port: another origin, asked about
    assert fetch("http://docs.python.org:443/x") is None  # not http's own port
    assert fetch("http://localhost:8080/") == ("allow", local)
    assert fetch("https://localhost:8080/") == ("allow", local)
    assert fetch("http://localhost/") is None
    assert fetch("https://docs.python.org.evil.example/") is None
    assert fetch("https://evil.example/?docs.python.org") is None
    assert fetch("http://[::1") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "run_command(",
        "run_command()",
        "run_command(npm test && rm x)",
        "run_command(a $(b))",
        "(npm test)",
        "mcp__s__t(x)",
        "todo_write(x)",
        "web_fetch(https://x.org/)",
        "web_fetch(x.org:)",
        "web_fetch(x.org:0)",
        "web_fetch(x.org:65536)",
        "web_fetch(x.org:http)",
        "web_fetch(x.org/path)",
        "web_fetch([::1)",
        "web_fetch([x.org]:80)",
        "read_file(" + "{" * 40 + "a" + "}" * 40 + ")",
        "read_file(" + "a" * 5000 + ")",
        "a\0b",
        17,
        None,
    ],
)
def test_a_malformed_rule_says_why(text):
    assert isinstance(parse_rule(text, "allow", "test"), str)


def test_a_bare_tool_covers_every_call():
    mcp = rule("mcp__files__delete", "deny")
    assert judge([mcp], Call("mcp__files__delete")) == ("deny", mcp)
    assert judge([mcp], Call("mcp__files__deletex")) is None


_SEPARATORS = st.sampled_from([";", "&&", "||", "|", "&", "\n", " ; ", "|&"])
_PLAIN = st.text(st.characters(blacklist_characters="'\"\\"), max_size=30)


@settings(max_examples=examples(500), deadline=None)
@given(_PLAIN, _SEPARATORS, st.text(max_size=40))
def test_a_compound_of_an_allowed_and_another_command_is_never_allowed(args, sep, rest):
    line = f"npm test {args}{sep}evil {rest}"
    assert run(line, rule("run_command(npm test *)")) is None


@settings(max_examples=examples(500), deadline=None)
@given(st.text(max_size=60))
def test_any_line_splits_in_linear_time_without_raising(line):
    split = split_commands(line * 50)
    assert all(command for command in split.commands)


_WORD = st.text(st.characters(categories=("L", "N"), whitelist_characters="-_./;&|()<>'\" "), max_size=8)


@pytest.mark.skipif(not os.path.exists("/bin/sh"), reason="needs a POSIX shell")
@settings(max_examples=examples(150), deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=5))
def test_a_certain_split_sees_the_words_the_shell_sees(words):
    """The shell itself as the oracle: when the split is certain and one command, sh runs that command with
    those very words."""
    line = "printf '%s\\0' start " + " ".join(words)
    split = split_commands(line)
    if not split.certain or len(split.commands) != 1:
        return
    done = subprocess.run(["/bin/sh", "-c", line], capture_output=True, timeout=10, env={"PATH": os.defpath})
    if b"syntax error" in done.stderr.lower():
        return  # `printf … |` runs nothing at all: no words to compare
    assert done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1] == split.commands[0][2:]


def test_a_hostile_project_file_is_reported_and_ignored_without_blocking(tmp_path):
    from ama_acp.session.rules.sources import project_rules, write_project_rules

    target = tmp_path / "real.toml"
    target.write_text('allow = ["run_command"]\n')
    link = tmp_path / "link.toml"
    link.symlink_to(target)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    garbage = tmp_path / "garbage.toml"
    garbage.write_bytes(b"\xff\xfe allow = [")
    for path in (link, fifo, garbage):
        loaded = project_rules(str(path))
        assert loaded.rules == [] and loaded.problems, path
    assert project_rules(str(tmp_path / "missing.toml")).problems == []

    written = tmp_path / "p" / "rules.toml"
    write_project_rules(str(written), '/w/"odd"\x7f', {"allow": ['run_command(echo "a\\b" *)'], "ask": [], "deny": []})
    loaded = project_rules(str(written))
    assert [r.shown for r in loaded.rules] == ['run_command(echo "a\\b" *)'] and loaded.problems == []
    assert oct(written.parent.stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize(
    ("line", "proposed"),
    [
        ("npm test --watch", "run_command(npm test *)"),
        ("git status", "run_command(git status *)"),
        ("rm foo.txt", "run_command(rm foo.txt)"),
        ("ls -la 'my dir'", "run_command(ls -la 'my dir')"),
        ("npm test && rm -rf ~", None),
        ("npm test $(id)", None),
        ("FOO=1 npm test", None),
        ("if true", None),
        ("echo *", None),
    ],
)
def test_always_allow_proposes_the_narrowest_useful_rule(tmp_path, line, proposed):
    from ama_acp.session.rules.book import RuleBook
    from ama_acp.session.rules.sources import Loaded

    book = RuleBook(Loaded(), str(tmp_path / "p.toml"), str(tmp_path))
    got = book.proposal("run_command", {"command": line})
    assert got == proposed
    if got is not None:  # the rule it writes covers the line it was proposed for
        assert run(line, rule(got)) == "allow"
