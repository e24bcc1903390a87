"""In-process byte streams for the rpc unit tests: anyio memory object streams seen as byte streams.

`read_lines` and `Peer` take any `ByteReceiveStream`/`ByteSendStream`; these carry each `send` as one chunk,
unchanged, so a test decides exactly how the bytes are cut into reads.
"""

from __future__ import annotations

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


class ChunkReceiveStream(ByteReceiveStream):
    """Hands out the chunks sent into a memory stream, one per `receive`; EOF when the sender closes."""

    def __init__(self, chunks: MemoryObjectReceiveStream[bytes]) -> None:
        self._chunks = chunks

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._chunks.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self._chunks.aclose()


class ChunkSendStream(ByteSendStream):
    """Sends each `send` as one chunk; a closed receiver is BrokenResourceError, as for a closed pipe."""

    def __init__(self, chunks: MemoryObjectSendStream[bytes]) -> None:
        self._chunks = chunks

    async def send(self, item: bytes) -> None:
        await self._chunks.send(item)

    async def aclose(self) -> None:
        await self._chunks.aclose()


def byte_pipe(buffer: float = 1024) -> tuple[ChunkSendStream, ChunkReceiveStream]:
    """A one-way byte pipe: (writer end, reader end)."""
    send, receive = anyio.create_memory_object_stream[bytes](buffer)
    return ChunkSendStream(send), ChunkReceiveStream(receive)


async def chunks_of(*chunks: bytes) -> ChunkReceiveStream:
    """A reader that yields exactly these chunks, then EOF."""
    writer, reader = byte_pipe(len(chunks) + 1)
    for chunk in chunks:
        await writer.send(chunk)
    await writer.aclose()
    return reader
