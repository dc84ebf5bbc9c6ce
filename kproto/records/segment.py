"""Reading a Kafka log segment file (``NNNNNNNNNNNNNNNNNNNN.log``) of any era.

A segment is the partition's entries — magic 0/1 messages and magic 2 batches — written back to back
exactly as they travel in a fetch response (docs/records.md, "Log segments"), so the one decoder of
:func:`kproto.records.decode_records` reads it.  Segments are large (1 GiB by default), so the file is read
in chunks and each chunk's complete entries decoded; an entry cut by the chunk end is carried into the next
read.  What cannot be completed at end of file is a *torn tail* (a broker that crashed mid-write leaves
one): it is reported on the :class:`Segment`, not raised, as Kafka's own recovery truncates it.
"""

from __future__ import annotations

import os
import struct
from typing import IO, Iterator, Optional, Union

from kproto.records.decoded import Batch
from kproto.records.format import DEFAULT_MAX_DECOMPRESSED_SIZE

__all__ = ["Segment", "read_segment"]

#: Bytes read per step; an entry larger than this is read whole (its size is known from its header).
CHUNK_SIZE = 8 * 1024 * 1024
_SIZE = struct.Struct(">i")


class Segment:
    """The batches of one log segment, read lazily on iteration.

    Iterate once for every :class:`~kproto.records.decoded.Batch` (each with its records).  After the
    iteration ends, ``valid_bytes`` is how many bytes of the file held complete entries and ``torn_tail``
    the byte offset where an incomplete last entry starts (``None`` when the file ends cleanly).  A
    malformed entry raises :class:`~kproto.errors.DecodeError` with its absolute offset in the file.
    ``max_decompressed_size`` caps the decompressed bytes per chunk (one decode call).
    """

    def __init__(
        self,
        source: Union[str, "os.PathLike[str]", IO[bytes]],
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        chunk_size: int = CHUNK_SIZE,
    ) -> None:
        self._source = source
        self._check_crc = check_crc
        self._limit = max_decompressed_size
        self._chunk = chunk_size
        self.valid_bytes = 0
        self.torn_tail: Optional[int] = None

    def __iter__(self) -> Iterator[Batch]:
        if isinstance(self._source, (str, bytes, os.PathLike)):
            with open(self._source, "rb") as stream:
                yield from self._batches(stream)
        else:
            yield from self._batches(self._source)

    def _batches(self, stream: IO[bytes]) -> Iterator[Batch]:
        from kproto.errors import DecodeError
        from kproto.records.codec import decode_records

        base = 0  # file offset of pending[0]
        pending = b""
        while True:
            want = self._chunk
            if len(pending) >= 12:  # an entry bigger than a chunk: read it whole
                want = max(want, 12 + _SIZE.unpack_from(pending, 8)[0] - len(pending))
            data = stream.read(want)
            at_end = not data
            pending += data
            if not pending:
                break
            try:
                decoded = decode_records(pending, check_crc=self._check_crc, max_decompressed_size=self._limit)
            except DecodeError as exc:
                raise type(exc)(exc.reason, (exc.offset or 0) + base) from None
            for batch in decoded.batches:
                batch.position += base
                yield batch
            self.valid_bytes = base + decoded.valid_bytes
            pending = pending[decoded.valid_bytes :]
            base += decoded.valid_bytes
            if at_end:
                self.torn_tail = base if pending else None
                break


def read_segment(
    path_or_file: Union[str, "os.PathLike[str]", IO[bytes]],
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Segment:
    """The batches of a Kafka log segment file (a path or a binary file object); see :class:`Segment`."""
    return Segment(path_or_file, check_crc=check_crc, max_decompressed_size=max_decompressed_size)
