"""One question per action (ama_acp/client/terminal/grants.py) and the line questions share (desk.py): a grant
covers exactly the command the person allowed, once, in its session and folder, until its tool call ends or the
bound passes; a withdrawn question frees the line."""

from __future__ import annotations

import io
import shlex
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.client.confine import Access
from ama_acp.client.display.render import Renderer
from ama_acp.client.terminal.desk import WITHDRAWN, Desk
from ama_acp.client.terminal.grants import GRANT_TTL_S, Grants, runs_exactly
from tests.support.hypothesis_profiles import examples

OPTIONS = [
    {"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def chose(option_id: str | None) -> dict[str, Any]:
    return {"outcome": "selected", "optionId": option_id} if option_id else {"outcome": "cancelled"}


SELECTED_YES = chose("yes")


def request(command: object, sid: str = "s", call_id: str = "c1", kind: str = "execute") -> dict[str, Any]:
    call = {"toolCallId": call_id, "title": "Run", "kind": kind, "rawInput": {"command": command}}
    return {"sessionId": sid, "toolCall": call, "options": OPTIONS}


def create(argv: list[str], sid: str = "s", inside: bool = True) -> Access:
    return Access("terminal/create", sid, "/work/project", inside, shlex.join(argv))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def granted(command: str = "ls", clock: Clock | None = None) -> Grants:
    grants = Grants(clock or Clock())
    grants.permitted(request(command), SELECTED_YES)
    return grants


def test_the_allowed_command_is_covered_once() -> None:
    grants = granted("echo hi")
    assert grants.spend(create(["/bin/sh", "-c", "echo hi"]))
    assert not grants.spend(create(["/bin/sh", "-c", "echo hi"]))  # a second terminal is asked about


def test_a_launcher_in_front_of_the_shell_does_not_matter_the_tail_does() -> None:
    assert granted("make test").spend(create(["/usr/bin/launcher", "--ro", "/", "--", "/bin/bash", "-c", "make test"]))
    assert granted("ls").spend(create(["ls"]))


def test_permission_for_ls_does_not_cover_rm() -> None:
    grants = granted("ls")
    for argv in (
        ["/bin/sh", "-c", "rm -rf ~"],
        ["/bin/sh", "-c", "ls; rm -rf ~"],
        ["rm", "-rf", "ls"],  # ends with the command, but `ls` is rm's argument here
        ["python3", "-c", "ls"],  # not a shell
        ["/bin/sh", "-c", "ls", "extra"],
        ["/bin/sh", "-c", "ls "],
    ):
        assert not grants.spend(create(argv)), argv
    assert grants.spend(create(["/bin/sh", "-c", "ls"]))  # still there for the command it was given for


def test_a_grant_is_for_its_session_and_the_session_s_folders() -> None:
    grants = granted("ls")
    assert not grants.spend(create(["/bin/sh", "-c", "ls"], sid="other"))
    assert not grants.spend(create(["/bin/sh", "-c", "ls"], inside=False))
    file_read = Access("fs/read_text_file", "s", "/etc/passwd", True, shlex.join(["/bin/sh", "-c", "ls"]))
    assert not grants.spend(file_read)


def test_only_an_allow_of_a_command_grants() -> None:
    grants = Grants(Clock())
    grants.permitted(request("ls"), chose("no"))
    grants.permitted(request("ls"), chose(None))
    grants.permitted(request("ls", kind="edit"), SELECTED_YES)
    grants.permitted(request(["ls"]), SELECTED_YES)
    grants.permitted(request(""), SELECTED_YES)
    shared: dict[str, Any] = request("ls")
    shared["options"] = [OPTIONS[0], {"optionId": "yes", "name": "Allow", "kind": "reject_once"}]
    grants.permitted(shared, SELECTED_YES)  # one id, two kinds: not a clear allow
    assert not grants.spend(create(["/bin/sh", "-c", "ls"]))


def test_a_grant_ends_with_its_tool_call_or_after_the_bound() -> None:
    clock = Clock()
    grants = granted("ls", clock)
    done: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
    grants.updated({"sessionId": "other", "update": done})  # another session's call of the same id
    grants.updated({"sessionId": "s", "update": {**done, "status": "in_progress"}})
    assert grants.spend(create(["/bin/sh", "-c", "ls"]))

    grants = granted("ls", clock)
    grants.updated({"sessionId": "s", "update": {**done, "status": "failed"}})
    assert not grants.spend(create(["/bin/sh", "-c", "ls"]))

    grants = granted("ls", clock)
    clock.now += GRANT_TTL_S + 1
    assert not grants.spend(create(["/bin/sh", "-c", "ls"]))


@settings(max_examples=examples(300), deadline=None)
@given(st.text(min_size=1), st.lists(st.text(), max_size=4), st.sampled_from(["/bin/sh", "sh", "/usr/bin/bash"]))
def test_any_command_is_matched_exactly_through_the_shell_quoting(
    command: str, launcher: list[str], shell: str
) -> None:
    assert runs_exactly(shlex.join([*launcher, shell, "-c", command]), command)
    assert not runs_exactly(shlex.join([*launcher, shell, "-c", command + "x"]), command)
    assert not runs_exactly(shlex.join([*launcher, shell, "-c", command, "x"]), command)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["sessionId", "toolCall", "options", "update"]), JSON),
    st.dictionaries(st.sampled_from(["outcome", "optionId"]), JSON),
)
def test_hostile_requests_and_updates_never_raise(params: dict[str, Any], outcome: dict[str, Any]) -> None:
    grants = Grants(Clock())
    grants.permitted(params, outcome)
    grants.updated(params)
    grants.spend(create(["/bin/sh", "-c", "ls"]))


class Line:
    """A terminal whose person never answers (until told)."""

    def __init__(self) -> None:
        self.answer = anyio.Event()
        self.prompts: list[str] = []

    async def read_line(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        await self.answer.wait()
        return "y"


def test_a_withdrawn_question_says_so_and_frees_the_line() -> None:
    async def main() -> None:
        out = io.StringIO()
        desk, line = Desk(Renderer(out, colour=False)), Line()
        answers: list[str | None] = []

        async def question(sid: str, prompt: str) -> None:
            answers.append(await desk.ask(sid, lambda: line.read_line(prompt)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(question, "s", "first")
            while line.prompts != ["first"]:
                await anyio.lowlevel.checkpoint()
            tg.start_soon(question, "t", "second")
            await anyio.wait_all_tasks_blocked()
            assert line.prompts == ["first"]  # the second waits for the line
            desk.withdraw("t")  # not the open one's session: nothing happens
            await anyio.wait_all_tasks_blocked()
            assert line.prompts == ["first"]
            desk.withdraw("s")
            await anyio.wait_all_tasks_blocked()
            assert line.prompts == ["first", "second"]
            line.answer.set()
        assert answers == [None, "y"]
        assert out.getvalue().count(WITHDRAWN) == 1

    anyio.run(main)


def test_a_question_cancelled_from_outside_is_withdrawn_and_frees_the_line() -> None:
    async def main() -> None:
        out = io.StringIO()
        desk, line = Desk(Renderer(out, colour=False)), Line()
        with anyio.move_on_after(0.05) as request:  # the agent's $/cancel_request on the request that asked
            await desk.ask("s", lambda: line.read_line("first"))
        assert request.cancelled_caught and WITHDRAWN in out.getvalue()
        line.answer.set()
        assert await desk.typed(lambda: line.read_line("» ")) == "y"
        assert out.getvalue().count(WITHDRAWN) == 1  # the person's own prompt is never withdrawn

    anyio.run(main)
