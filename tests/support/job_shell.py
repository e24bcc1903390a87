"""A shell's job control, as small as a test needs: `python job_shell.py COMMAND…` runs COMMAND as the foreground
job of this terminal; each time the job stops (Ctrl-Z), it takes the terminal back as a shell does, writes the
terminal's mode as it finds it (`[job stopped: echo=1 icanon=1]`), and continues the job in the foreground
(`fg`). It exits with the job's exit status.

Run it as the session leader of a pseudo-terminal (tests/support/pty_terminal.py does). Without such a parent a
job's process group is orphaned and the kernel does not stop it at all, which is why a test needs this.
"""

from __future__ import annotations

import os
import signal
import sys
import termios


def main(argv: list[str]) -> int:
    tty = sys.stdin.fileno()
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a shell moves the terminal between groups from the background
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.tcsetpgrp(tty, os.getpgrp())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)  # exec keeps an ignored signal ignored
        os.execvp(argv[0], argv)
    try:
        os.setpgid(pid, pid)  # also here: whichever of the two runs first
    except PermissionError:  # EACCES: the child has exec'd already, so its own setpgid ran first, as shells find
        if os.getpgid(pid) != pid:
            raise
    os.tcsetpgrp(tty, pid)
    while True:
        _, status = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
        os.tcsetpgrp(tty, os.getpgrp())
        lflag = termios.tcgetattr(tty)[3]
        echo, icanon = int(bool(lflag & termios.ECHO)), int(bool(lflag & termios.ICANON))
        sys.stdout.write(f"\n[job stopped: echo={echo} icanon={icanon}]\n")
        sys.stdout.flush()
        os.tcsetpgrp(tty, pid)
        os.killpg(pid, signal.SIGCONT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
