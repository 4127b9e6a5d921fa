"""Server-sent events, as bytes: the ``data`` of each complete event, nothing else (pure, no I/O).

Per the SSE spec (https://html.spec.whatwg.org/multipage/server-sent-events.html): lines end with CRLF, LF or CR;
an empty line ends an event; the values of its ``data`` lines (one leading space dropped) are joined with
``\\n``; ``:`` comments and the other fields (``event``, ``id``, ``retry``) are ignored; an event without data is
not an event, and an event the stream ends in the middle of is dropped.
"""

from __future__ import annotations

__all__ = ["split_events"]


def split_events(pending: bytes, piece: bytes, *, final: bool = False) -> tuple[list[bytes], bytes]:
    """The data of each event completed by ``pending + piece``, and the bytes to keep for the next piece.

    ``pending`` is what the previous call returned to keep (``b""`` at first); ``final`` (the end of the body)
    keeps nothing back. Invariant: feeding a body in any split gives the same events as feeding it whole.
    """
    buffer = pending + piece if pending else piece
    start = max(len(pending) - 2, 0)  # an event ends in the new bytes (or at the seam): no rescan of old ones
    held = b""
    if b"\r" in piece or pending.endswith(b"\r"):
        if buffer.endswith(b"\r") and not final:  # maybe the first half of a CRLF: decide with the next piece
            buffer, held = buffer[:-1], b"\r"
        buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    end = buffer.rfind(b"\n\n", start)
    if end < 0:
        return [], buffer + held
    events: list[bytes] = []
    for block in buffer[:end].split(b"\n\n"):
        if block.startswith(b"data: ") and b"\n" not in block:  # the usual event: one data line
            events.append(block[6:])
            continue
        data: list[bytes] = []
        for line in block.split(b"\n"):
            if line.startswith(b"data"):
                value = line[4:]
                if not value or value[:1] == b":":
                    data.append(value[2:] if value[1:2] == b" " else value[1:])
                # else a field whose name only starts with "data" (ignored, like any unknown field)
        if data:
            events.append(data[0] if len(data) == 1 else b"\n".join(data))
    return events, buffer[end + 2 :] + held
