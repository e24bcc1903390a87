"""Session ids for the stdlib fixture agents, made without importing uuid (which imports platform: ~3 ms of every
start of an agent the suite starts hundreds of times)."""

import os


def new_uuid4() -> str:
    """`str(uuid.uuid4())`, without importing uuid: 16 random bytes, version 4."""
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0F | 0x40
    b[8] = b[8] & 0x3F | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
