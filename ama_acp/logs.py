"""Logging: stderr at --log-level and `<data dir>/logs/ama.log` (rotated). Never stdout.

API keys never reach the log: a filter masks the values of secret environment variables (ama_acp.secrets); the
same filter makes every control character in a message visible (a log line is read on a terminal).
The log is private like the sessions: the directory 0700, the files 0600 (they hold prompts, paths, errors).
"""

from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path

from ama_acp import ownfiles
from ama_acp.redact import redact
from ama_acp.textsafe import one_line, visible


class _Redact(logging.Filter):
    """No secret in a log line, and nothing in one a terminal would obey: the message (its arguments filled in:
    a provider's error text, a server's name) is one line with its controls made visible (`^[` for ESC, `^J` for
    a newline, ama_acp/textsafe.py), so a log line cannot set the clipboard, retitle the terminal or forge a
    line of its own; a traceback keeps its lines, with the controls in them made visible."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = one_line(redact(msg))
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # A traceback can quote a secret too (an exception message, a URL): format it here, redacted.
            record.exc_text = visible(redact(_plain.formatException(record.exc_info)))
        elif record.exc_text:
            record.exc_text = visible(record.exc_text)
        if record.stack_info:
            record.stack_info = visible(record.stack_info)
        return True


_plain = logging.Formatter()


class _PrivateLogFile(logging.FileHandler):
    """The log file, rotated when the next line would take it past `max_bytes`: ama.log becomes ama.log.1, .1 .2,
    and so on up to `backups` (what logging.handlers' RotatingFileHandler does; importing that module takes ~5 ms
    of every cold start — pickle, queue, socket — for these few lines). Every file it opens (the first, and each
    one after a rollover) is created 0600, and an existing one made 0600, before anything is written to it."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        super().__init__(path, mode="a", encoding="utf-8", delay=True)
        self.max_bytes = max_bytes
        self.backups = backups

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._full(record):
                self._rotate()
        except Exception:
            self.handleError(record)  # logging's own report on stderr; the line is still tried below
        super().emit(record)

    def _full(self, record: logging.LogRecord) -> bool:
        if self.stream is None:
            self.stream = self._open()
        self.stream.seek(0, io.SEEK_END)  # the file is opened O_APPEND: its position is 0 until the first write
        return self.stream.tell() + len(self.format(record)) + 1 >= self.max_bytes

    def _rotate(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None  # reopened by FileHandler.emit
        base = self.baseFilename
        for n in range(self.backups - 1, 0, -1):
            if os.path.lexists(f"{base}.{n}"):
                os.replace(f"{base}.{n}", f"{base}.{n + 1}")  # a link planted as one is moved, never followed
        if os.path.lexists(base):
            os.replace(base, f"{base}.1")

    def _open(self) -> io.TextIOWrapper:
        # Through the one opener of ama's folders: a FIFO or a link planted as the log is refused (an OSError,
        # which logging reports on stderr), never waited on or written through.
        fd = _open_log(Path(self.baseFilename))
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            os.close(fd)
            raise
        # A text mode (logging opens its files so): open() gives a TextIOWrapper.
        stream = open(fd, self.mode, encoding=self.encoding, errors=self.errors)
        assert isinstance(stream, io.TextIOWrapper)
        return stream


def _open_log(path: Path) -> int:
    """The log file (`<data dir>/logs/ama.log` or a rotated one), through the one opener of ama's folders."""
    return ownfiles.open_file(path, path.parent.parent, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def setup_logging(data_dir: str, level: str = "warning") -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(getattr(logging, level.upper(), logging.WARNING))
    err.setFormatter(fmt)
    err.addFilter(_Redact())
    root.addHandler(err)
    try:
        logs = Path(data_dir) / "logs"
        with ownfiles.folder(logs, Path(data_dir), create=True) as fd:  # a link as the folder: refused
            os.fchmod(fd, 0o700)  # an older ama made it 0755
        for old in logs.glob("ama.log.*"):  # and its rotated files 0644
            if not old.is_symlink():
                os.chmod(old, 0o600)
        fh = _PrivateLogFile(logs / "ama.log", max_bytes=5 * 1024 * 1024, backups=3)
        fh.stream = fh._open()  # now, not at the first record: a FIFO or a link as the log is no log file, said
        fh.setLevel(logging.INFO)
        fh.setFormatter(fmt)
        fh.addFilter(_Redact())
        root.addHandler(fh)
    except OSError as exc:
        root.warning("no log file in %s: %s", data_dir, exc)
    # httpx logs every request URL at INFO; a key put in a base URL's query string must not reach the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    # The same for the MCP SDK's HTTP client (httpx2) and its transports: an MCP server's URL may carry a token.
    for name in ("httpx2", "httpcore2", "mcp.client.streamable_http", "mcp.client.sse"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # A server that writes garbage makes the SDK log a traceback per line; ama reports the server once itself.
    logging.getLogger("mcp.client.stdio").setLevel(logging.CRITICAL)
