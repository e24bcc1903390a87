"""session/load, resume, list, close and delete: sessions that survive the process."""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING

import anyio

from ama_acp.rpc.dispatch import defer
from ama_acp.rpc.errors import RESOURCE_NOT_FOUND, SESSION_BUSY, AcpError
from ama_acp.session import handover, options
from ama_acp.session.history import fork
from ama_acp.session.live import Session
from ama_acp.session.options import SessionSetup
from ama_acp.session.restore import replay_updates, restore
from ama_acp.session.store import session_store as st
from ama_acp.session.store.cwd import normal_cwd, same_cwd
from ama_acp.session.store.entries import DirectoriesEntry
from ama_acp.session.store.handover import ask_release
from ama_acp.session.store.listing import InvalidCursor
from ama_acp.session.tasks import stored as stored_tasks
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.manager import SessionManager

log = logging.getLogger(__name__)

PAGE_SIZE = 50


class Lifecycle:
    def __init__(self, manager: SessionManager) -> None:
        self.m = manager

    async def _open(self, session_id: str, cwd: str, additional: list[str] | None) -> tuple[Session, st.LoadedSession]:
        await self._close_live(session_id)
        cwd = normal_cwd(cwd)  # `/x/proj/` and `/x/proj` are one folder, whichever editor spelled it
        dirs = self.m.check_dirs(cwd, additional)
        await self._take_over(session_id)
        loaded = self._read(session_id)
        header = loaded.header
        # A file stored before the normal form may hold `/x/proj/`: both spellings open it.
        if not same_cwd(header.cwd, cwd):
            raise AcpError.invalid_params(
                f"cwd: session {session_id} belongs to {normal_cwd(header.cwd)!r}, not {cwd!r}"
            )
        store = self.m.store
        setup = SessionSetup(
            session_id, cwd, dirs, self.m.config.mode, self.m.default_model, created_at=header.created_at
        )
        restored = restore(loaded, store.handoff_dir(session_id), setup, self.m.tool)
        session = Session(self.m, restored.setup, restored)
        loaded.entries.extend(restored.repair)  # replay shows the interrupted calls as failed
        self._open_file(session)
        # Written back, so the file itself pairs every call with a result: appending is the one change a crash
        # cannot make worse (the repair is recomputed on the next load if these are lost).
        for entry in restored.repair:
            session.persist(entry)
        if dirs != list(header.additional_directories):
            session.persist(DirectoriesEntry(additional_directories=dirs))
        self.m.register(session)
        return session, loaded

    async def _close_live(self, session_id: str) -> None:
        """A live session of this id is closed first (reopened from the file: one source of truth)."""
        live = self.m.live(session_id)  # one session/new answered but not built yet is built, then reopened
        if live is None:
            return
        if live.busy:
            raise AcpError.session_busy(session_id)
        if not live.journal.saving and not self.m.store.exists(session_id):
            # Its file could never be made (docs/sessions.md "Unsaved sessions"): nothing to load it from. The
            # live session is left as it is (prompt, set_*, close still work), and the answer says why.
            raise AcpError(
                RESOURCE_NOT_FOUND,
                f"Session {session_id} has no file to load: it was never saved (its file could not be created) "
                "or another program deleted it; it is still open in this connection",
                {"sessionId": session_id},
            )
        await self.m.close(session_id)

    async def _take_over(self, session_id: str) -> None:
        """A session another ama holds is asked for before its file is read (docs/sessions.md "Sessions open
        elsewhere"): an idle holder closes it and answers, a busy one keeps it (this load's error says what to
        do). No answer, or no holder: the open below finds the lock as it is."""
        if not st.is_valid_session_id(session_id):
            return  # _read refuses it
        store = self.m.store
        pid = await anyio.to_thread.run_sync(store.held_by, session_id)
        if pid is None or pid == os.getpid():
            return
        answer = await anyio.to_thread.run_sync(ask_release, pid, session_id)
        if answer == "busy":
            raise handover.busy_elsewhere(session_id, pid)
        if answer != "released":
            raise handover.open_elsewhere(session_id, pid)

    def _read(self, session_id: str) -> st.LoadedSession:
        try:
            loaded = self.m.store.read(session_id)
        except st.SessionNotFound:
            raise AcpError.session_not_found(session_id) from None
        except st.SessionFormatError as exc:
            raise AcpError.invalid_params(f"sessionId: {exc}") from None
        except OSError as exc:  # a file that exists but cannot be read (permissions, an I/O error, a directory)
            log.error("session %s: cannot read its file: %s", session_id, exc)
            raise AcpError.internal(f"session {session_id} cannot be read: {exc.strerror or exc}") from None
        if loaded.torn_tail:
            log.warning("session %s: its last line was torn (a crash mid-write); it was skipped", session_id)
        return loaded

    def _open_file(self, session: Session) -> None:
        """The session's file opened again for writing; when it cannot be, the session goes on unsaved."""
        store = self.m.store
        try:
            session.journal.attach(store.open_writer(session.id))
        except st.SessionBusy as exc:
            # The store's lock is held by another ama process (taken since _take_over asked, or one that did not
            # answer), not by a prompt running here.
            raise handover.open_elsewhere(session.id, exc.pid) from None
        except st.SessionWriteError as exc:
            # Readable but not writable (a read-only file or disk): the session goes on, unsaved, and says so.
            session.journal.cannot_save(exc)
        except (st.SessionNotFound, st.SessionFormatError) as exc:
            # Removed or replaced between the read and this open: what was read goes on, unsaved, and says so.
            session.journal.cannot_save(st.SessionWriteError(store.path(session.id), str(exc), exc))

    def _connect_mcp(self, session: Session, servers: list[dict[str, object]]) -> None:
        self.m.connect_mcp(session, servers)
        # The stored figure was restored before the servers were known: from now on it is compared with the
        # prefix once their tools are final, not with the partial one of servers still starting (E4, U9).
        if session.ctx.reopen is not None:
            session.ctx.reopen.servers_known(session.tools.mcp)

    async def load(self, req: w.LoadSessionRequest) -> w.LoadSessionResponse:
        if (task := stored_tasks.parse_task_session_id(req.session_id)) is not None:  # a task: read, not opened
            return await self._open_stored_task(task, req.cwd, replay=True)
        session, loaded = await self._open(req.session_id, req.cwd, req.additional_directories)
        self._connect_mcp(session, req.mcp_servers)  # the editor's list of this load wins (R69)
        for update in replay_updates(loaded):  # all history before the response (R67)
            await session.send(update)
        await _send_title(session)  # the end of the replay: the thread's name with its history
        defer(session.announce_open)  # E4: after the replay and the response
        return w.LoadSessionResponse(modes=options.mode_state(session.mode), config_options=session.config_options())

    async def resume(self, req: w.ResumeSessionRequest) -> w.LoadSessionResponse:
        if (task := stored_tasks.parse_task_session_id(req.session_id)) is not None:
            return await self._open_stored_task(task, req.cwd, replay=False)
        session, _ = await self._open(req.session_id, req.cwd, req.additional_directories)
        self._connect_mcp(session, req.mcp_servers)  # R75
        defer(functools.partial(_announce_resumed, session))  # no replay (R74): all after the response
        return w.LoadSessionResponse(modes=options.mode_state(session.mode), config_options=session.config_options())

    async def fork(self, req: w.ForkSessionRequest) -> w.NewSessionResponse:
        """session/fork (unstable): a new session from a copy of the original's file (session/history/fork.py), opened as
        a resume opens one; the original, live or not, is only read."""
        cwd = normal_cwd(req.cwd)
        dirs = self.m.check_dirs(cwd, req.additional_directories)  # a relative or missing folder: -32602
        live = self.m.live(req.session_id)  # one session/new answered but not built yet is built (its file made)
        if live is not None:
            fork.refuse_unsaved(req.session_id, live.journal.saving)
        copy = fork.fork_copy(self.m.store, self._read(req.session_id), cwd, dirs, live.busy if live else None)
        header = copy.loaded.header
        setup = SessionSetup(
            header.session_id, cwd, dirs, self.m.config.mode, self.m.default_model, created_at=header.created_at
        )
        restored = restore(copy.loaded, self.m.store.handoff_dir(header.session_id), setup, self.m.tool)
        session = Session(self.m, restored.setup, restored)
        fork.write_fork(self.m.store, session.journal, copy)
        for entry in restored.repair:  # calls the original left open at the end of its file, ended as on a load
            session.persist(entry)
        self.m.register(session)
        self._connect_mcp(session, req.mcp_servers or [])  # the request's servers, as session/new's
        defer(functools.partial(_announce_resumed, session))  # the fork's title, then E4 (D2: the meter)
        return w.NewSessionResponse(
            session_id=session.id, modes=options.mode_state(session.mode), config_options=session.config_options()
        )

    async def list(self, req: w.ListSessionsRequest) -> w.ListSessionsResponse:
        try:
            # Only sessions someone spoke in: an editor that opens threads freely (every session/new writes a
            # file at once) must not fill the first page with empty "(untitled)" rows. Such a session still
            # loads and resumes by its id.
            page, cursor = self.m.store.list(req.cwd, req.cursor, PAGE_SIZE, spoken_only=True)
        except InvalidCursor:
            raise AcpError.invalid_params("cursor: not a cursor this agent issued") from None
        held = self.m.store.held_elsewhere(s.session_id for s in page)  # one read of /proc/locks
        return w.ListSessionsResponse(
            sessions=[
                w.SessionInfo(
                    session_id=s.session_id,
                    cwd=s.cwd,
                    title=s.title,
                    updated_at=s.updated_at,
                    additional_directories=s.additional_directories or None,
                    meta=_held_meta(held.get(s.session_id)),
                )
                for s in page
            ],
            next_cursor=cursor,
        )

    async def _open_stored_task(
        self, task: stored_tasks.TaskSessionId, cwd: str, *, replay: bool
    ) -> w.LoadSessionResponse:
        m = self.m
        return await stored_tasks.open_task(
            task,
            cwd,
            replay=replay,
            read_parent=self._read,
            data_dir=m.store.sessions_dir.parent,
            tool=m.tool,
            send=m.send_update,
        )

    async def close(self, req: w.SessionIdRequest) -> w.Empty:
        if stored_tasks.parse_task_session_id(req.session_id) is not None:
            return w.Empty()  # a loaded task was never made live (session/tasks/stored.py): nothing to close
        if self.m.live(req.session_id) is None:
            raise AcpError.session_not_found(req.session_id)
        await self.m.close(req.session_id)
        return w.Empty()

    async def delete(self, req: w.SessionIdRequest) -> w.Empty:
        await self.m.close(req.session_id)
        try:
            self.m.store.delete(req.session_id)
        except st.SessionNotFound:
            # R87: deleting a session that is gone already (or never was) succeeds silently. An id that is not
            # a valid session id touches no file either (check_session_id refuses it before any path is built).
            log.info("session/delete of %r: no such session; nothing to delete", req.session_id)
        except st.SessionBusy as exc:
            # Its writer's lock is held by another ama process (this one's was closed just above): removing the
            # file under it would lose everything that process saves from now on. Nothing was removed.
            data: dict[str, object] = {"sessionId": req.session_id}
            if exc.pid is not None:
                data["pid"] = exc.pid
            raise AcpError(
                SESSION_BUSY, f"Cannot delete: {exc}; nothing was removed (close it there first)", data
            ) from None
        except st.NotASessionFile as exc:  # a directory under the session's name: not ama's to remove
            raise AcpError.invalid_params(f"sessionId: {exc}; it was left alone") from None
        return w.Empty()


def _held_meta(holder: st.Holder | None) -> w.Meta | None:
    """A listed session another ama process holds: `_meta.ama.heldBy` (docs/protocol.md)."""
    if holder is None:
        return None
    return {"ama": {"heldBy": {"pid": holder.pid, "idle": not holder.busy}}}


async def _send_title(session: Session) -> None:
    """A titled session tells the client its title when it is opened again: a client that opened it by id
    (`ama acp-client --load`, an editor's thread list) has no title otherwise. Sent once: the session's
    `_sent_title` is its stored title already, so the next turn's end does not repeat it."""
    if session.title:
        await session.send(w.SessionInfoUpdate(title=session.title, updated_at=session.updated_at))


async def _announce_resumed(session: Session) -> None:
    await _send_title(session)
    await session.announce_open()
