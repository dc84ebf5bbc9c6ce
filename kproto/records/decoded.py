"""Containers for decode results shared by both backends: :class:`MessageSet` and :class:`MessageColumns`."""

from __future__ import annotations

from array import array
from typing import Any, Iterator, List, Sequence

__all__ = ["MessageSet", "MessageColumns"]


class MessageSet:
    """The messages decoded from one message set, compressed wrappers already expanded.

    ``valid_bytes`` is how many input bytes held complete messages; ``partial`` says the input ended with an
    incomplete message (a fetch response cut at ``max_bytes``), which was dropped without error.
    ``messages`` is a list (pure backend) or a lazy sequence that builds each message when iteration
    reaches it (Cython backend; the whole set was validated before the MessageSet was returned).
    """

    __slots__ = ("messages", "valid_bytes", "partial")

    def __init__(self, messages: Sequence[Any], valid_bytes: int, partial: bool) -> None:
        self.messages = messages
        self.valid_bytes = valid_bytes
        self.partial = partial

    def __iter__(self) -> Iterator[Any]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, index: int) -> Any:
        return self.messages[index]

    def __repr__(self) -> str:
        tail = ", partial tail" if self.partial else ""
        return f"MessageSet({len(self.messages)} messages, {self.valid_bytes} valid bytes{tail})"


class MessageColumns:
    """A message set decoded into columns (one entry per message, compressed wrappers expanded).

    ``offsets``/``timestamps`` are ``array('q')`` (timestamp -1 for magic 0), ``magics``/``attributes``/
    ``codecs`` ``array('b')``, ``crc_ok`` ``array('B')`` (0/1).  Keys and values are each one contiguous
    ``bytes`` buffer (``key_data``) with ``array('i')`` boundaries (``key_offsets``, length ``count + 1``:
    message *i* is ``key_data[key_offsets[i]:key_offsets[i+1]]``) and ``array('B')`` null flags
    (``key_null``, 1 = null).  This is Arrow's BinaryArray layout, so :meth:`to_arrow` wraps it without copying
    the payloads.
    """

    __slots__ = (
        "count",
        "offsets",
        "timestamps",
        "magics",
        "attributes",
        "codecs",
        "crc_ok",
        "key_data",
        "key_offsets",
        "key_null",
        "value_data",
        "value_offsets",
        "value_null",
        "valid_bytes",
        "partial",
    )

    count: int
    offsets: array
    timestamps: array
    magics: array
    attributes: array
    codecs: array
    crc_ok: array
    key_data: bytes
    key_offsets: array
    key_null: array
    value_data: bytes
    value_offsets: array
    value_null: array
    valid_bytes: int
    partial: bool

    def __init__(self, **columns: Any) -> None:
        for name in self.__slots__:
            setattr(self, name, columns[name])

    def __len__(self) -> int:
        return self.count

    def keys(self) -> List[Any]:
        """The keys as a list of ``bytes``/``None`` (convenience; allocates one object per message)."""
        return _unpack_binary(self.key_data, self.key_offsets, self.key_null)

    def values(self) -> List[Any]:
        """The values as a list of ``bytes``/``None`` (convenience; allocates one object per message)."""
        return _unpack_binary(self.value_data, self.value_offsets, self.value_null)

    def to_arrow(self) -> Any:
        """A ``pyarrow.RecordBatch`` (requires pyarrow): offset, timestamp, magic, attributes, codec, crc_ok, key, value."""
        import pyarrow as pa
        import pyarrow.compute as pc

        magics = pa.array(self.magics, pa.int8())
        timestamps = pa.array(self.timestamps, pa.int64())
        timestamps = pc.if_else(pc.equal(magics, 0), pa.scalar(None, pa.int64()), timestamps)
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.offsets, pa.int64()),
                timestamps,
                magics,
                pa.array(self.attributes, pa.int8()),
                pa.array(self.codecs, pa.int8()),
                pc.not_equal(pa.array(self.crc_ok, pa.uint8()), 0),
                _arrow_binary(pa, pc, self.count, self.key_data, self.key_offsets, self.key_null),
                _arrow_binary(pa, pc, self.count, self.value_data, self.value_offsets, self.value_null),
            ],
            names=["offset", "timestamp", "magic", "attributes", "codec", "crc_ok", "key", "value"],
        )

    def __repr__(self) -> str:
        tail = ", partial tail" if self.partial else ""
        return f"MessageColumns({self.count} messages, {self.valid_bytes} valid bytes{tail})"


def _unpack_binary(data: bytes, bounds: Sequence[int], nulls: Sequence[int]) -> List[Any]:
    return [None if nulls[i] else data[bounds[i] : bounds[i + 1]] for i in range(len(nulls))]


def _arrow_binary(pa: Any, pc: Any, count: int, data: bytes, bounds: array, nulls: array) -> Any:
    null_count = nulls.tobytes().count(1)
    validity = None
    if null_count:
        validity = pc.equal(pa.array(nulls, pa.uint8()), 0).buffers()[1]
    return pa.Array.from_buffers(
        pa.binary(), count, [validity, pa.py_buffer(bounds), pa.py_buffer(data)], null_count
    )
