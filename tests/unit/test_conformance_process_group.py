"""`ama_acp/client/process_group.py` (shared by the conformance suite and external task agents): what an agent
leaves in its process group is ended (TERM, then KILL for what ignores TERM); a group with nothing left, or our
own group, is never signalled."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ama_acp.client.process_group import alive, end_group
from tests.support.leaks import processes_mentioning

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")]

# A leader that starts a child in its own group and exits, leaving the child (which ignores SIGTERM when asked).
LEADER = """
import subprocess, sys
code = "import signal, sys, time\\nif sys.argv[2] == 'stubborn': signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
code += "print('ready', flush=True)\\ntime.sleep(300)"
child = subprocess.Popen([sys.executable, "-c", code, sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE)
child.stdout.readline()
"""


def _orphan(marker: str, kind: str) -> int:
    """Start a leader in a new session; it returns once its child runs. The group id (the leader's pid)."""
    leader = subprocess.Popen([sys.executable, "-c", LEADER, marker, kind], start_new_session=True)
    assert leader.wait(timeout=30) == 0
    assert processes_mentioning(marker), "the child did not start"
    return leader.pid


@pytest.mark.parametrize("kind", ["polite", "stubborn"])
async def test_the_processes_left_in_a_group_are_ended(tmp_path, kind):
    marker = str(tmp_path / f"orphan-{kind}")
    pgid = _orphan(marker, kind)
    assert alive(pgid)
    how = await end_group(pgid, grace=0.5)
    assert how == ("terminated" if kind == "polite" else "killed")
    assert not alive(pgid) and not processes_mentioning(marker)


async def test_nothing_left_means_no_signal_and_our_own_group_is_never_signalled():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)  # noqa: ASYNC221 - a test's short setup
    assert await end_group(int(done.stdout)) is None
    assert await end_group(os.getpgrp()) is None
