"""Requests of ours awaiting their answers: ids handed out in order, the answer matched back by id, the first
answer (or failure) the one that counts.

Shared by ama's server (`peer.Peer`: its requests to the editor) and ama's own client (`client/connection.py`:
its requests to an agent). Only the bookkeeping is shared: whether a message is a response, and what a
response with an odd id or a malformed error means, each side decides for itself (the client's judgement is
the conformance suite's, and stays independent of the server's `dispatch.classify`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import anyio

from ama_acp.rpc.dispatch import JSONValue


class Pending:
    """One request awaiting its answer: a result or an error, set once."""

    __slots__ = ("id", "method", "event", "result", "error")

    def __init__(self, request_id: int, method: str) -> None:
        self.id = request_id
        self.method = method
        self.event = anyio.Event()
        self.result: JSONValue = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.event.is_set()

    def resolve(self, result: JSONValue = None, error: BaseException | None = None) -> bool:
        """Take the answer, unless one was already taken (a second response, or one after a failure): then
        nothing changes and the return is False."""
        if self.event.is_set():
            return False
        self.result, self.error = result, error
        self.event.set()
        return True


P = TypeVar("P", bound=Pending)


class PendingRequests(Generic[P]):
    """The open requests by id. Ids are ints counted from 1; an answer names one only by an int (`type() is`:
    a bool or a float that equals it is another id)."""

    def __init__(self, make: Callable[[int, str], P]) -> None:
        self._make = make
        self._ids = itertools.count(1)
        self._open: dict[int, P] = {}

    def open(self, method: str) -> P:
        """A new request, open under the next id."""
        request_id = next(self._ids)
        pending = self._open[request_id] = self._make(request_id, method)
        return pending

    def find(self, request_id: object) -> P | None:
        """The open request an answer's id names exactly, if any."""
        return self._open.get(request_id) if type(request_id) is int else None

    def close(self, pending: P) -> None:
        """No longer open (answered and read, or given up)."""
        self._open.pop(pending.id, None)

    def __iter__(self) -> Iterator[P]:
        return iter(list(self._open.values()))

    def fail_all(self, error: Callable[[P], BaseException]) -> None:
        """Every open request not yet answered fails with `error(pending)` (the connection ended); an answer
        already taken stands, even if its waiter has not woken yet."""
        for pending in self:
            if not pending.done:
                pending.resolve(error=error(pending))
