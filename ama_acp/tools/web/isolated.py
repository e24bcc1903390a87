"""HTML → Markdown in a process of its own, for a page nested deeper than tools/web/nesting.py's NESTING_LIMIT
(docs/tools.md "web_fetch"): if the native converter crashes on it (a stack overflow is a SIGSEGV, which no
`except` catches), that process dies and only the call fails; ama and every other session's turn go on.

The child is this interpreter, isolated (`-I`: no PYTHON* variables, no user site, not the working directory),
started in `/` with an empty environment: the page on its stdin, the Markdown on its stdout. A cancel of the
call kills it (anyio closes a process it was waiting for).

    python -I -m ama_acp.tools.web.isolated URL < page.html > page.md
"""

from __future__ import annotations

import signal
import sys

import anyio
import anyio.abc

from ama_acp.errors import ToolError

_ENCODING = "utf-8"
_ERRORS = "surrogatepass"  # a str the parent holds crosses the pipe whole, whatever it holds


class ConversionFailed(ToolError):
    """The child did not give Markdown back; `reason` says how it ended, for the note the model reads."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def command(url: str) -> list[str]:
    return [sys.executable, "-I", "-m", "ama_acp.tools.web.isolated", url]


async def convert_apart(page: str, url: str) -> str:
    """The page's Markdown, converted by a child process; ConversionFailed when it crashed or failed."""
    out, err = bytearray(), bytearray()

    async def drain(stream: anyio.abc.ByteReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    async with await anyio.open_process(command(url), cwd="/", env={}) as child:
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, child.stdout, out)
            tg.start_soon(drain, child.stderr, err)
            try:
                await child.stdin.send(page.encode(_ENCODING, _ERRORS))
                await child.stdin.aclose()
            except (anyio.BrokenResourceError, OSError):
                pass  # it ended before reading the whole page: how it ended says why
            status = await child.wait()
    if status == 0:
        return out.decode(_ENCODING, "replace")
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        raise ConversionFailed(f"the converter crashed ({name})")
    said = err.decode(_ENCODING, "replace").strip().splitlines()
    raise ConversionFailed(f"the converter failed: {said[-1][:200] if said else f'exit status {status}'}")


def main() -> None:
    from ama_acp.tools.web.markdown import markdown_of

    page = sys.stdin.buffer.read().decode(_ENCODING, _ERRORS)
    sys.stdout.buffer.write(markdown_of(page, sys.argv[1]).encode(_ENCODING, "replace"))


if __name__ == "__main__":
    main()
