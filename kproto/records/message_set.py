"""Public message set API: decode and encode magic 0/1 message sets, with every Kafka 0.8-0.10 codec.

The work is done by the backend :mod:`kproto._backend` selected (Cython or pure Python); this module checks
options once and dispatches.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Iterable, Optional

from kproto._backend import records_impl as _impl
from kproto.errors import EncodeError
from kproto.records.compression import SNAPPY_FRAMINGS, compress_buffer
from kproto.records.decoded import MessageColumns, MessageSet
from kproto.records.format import DEFAULT_MAX_DECOMPRESSED_SIZE, TIMESTAMP_TYPE_MASK, codec_id

__all__ = ["Message", "MessageSetCodec", "decode_message_set", "encode_message_set", "decode_columns"]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _check_limit(max_decompressed_size: int) -> int:
    if not isinstance(max_decompressed_size, int) or not 0 <= max_decompressed_size <= 2**62:
        raise ValueError(f"max_decompressed_size must be a non-negative int, not {max_decompressed_size!r}")
    return max_decompressed_size


class MessageSetCodec:
    """The message set API bound to one implementation module (``kproto._fast._records`` or
    ``kproto.records._pure``).  The module-level functions use the backend :mod:`kproto._backend` chose; tests
    and benchmarks build one of these per backend to run both in one process.
    """

    def __init__(self, impl: ModuleType) -> None:
        self.impl = impl
        self.Message = impl.Message

    def decode_message_set(
        self, data: Any, *, check_crc: bool = True, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> MessageSet:
        """Decode a magic 0/1 message set (the bytes of a ``records`` field, without its int32 size).

        Compressed wrappers are expanded into their inner messages with absolute offsets.  A set that ends
        in an incomplete message (a fetch response cut at ``max_bytes``) is not an error: the result's
        ``partial`` is True and ``valid_bytes`` says where the complete messages end.  Anything else that
        does not parse raises :class:`~kproto.errors.DecodeError` naming the absolute byte offset; wrappers
        that together decompress to more than ``max_decompressed_size`` bytes (default
        :data:`~kproto.records.format.DEFAULT_MAX_DECOMPRESSED_SIZE`, 64 MiB) or nested compression raises
        :class:`~kproto.errors.LimitExceededError`.  ``check_crc=False`` skips CRC32 validation.
        """
        return self.impl.decode(data, bool(check_crc), _check_limit(max_decompressed_size))

    def decode_columns(
        self,
        data: Any,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        arrow: bool = False,
    ) -> Any:
        """Decode a message set straight into columns: a :class:`MessageColumns`, or with ``arrow=True`` a
        ``pyarrow.RecordBatch`` (columns offset, timestamp, magic, attributes, codec, crc_ok, key, value).

        Same rules as :meth:`decode_message_set`, except that ``check_crc=False`` still computes each CRC
        and records the outcome in ``crc_ok`` instead of raising (with ``check_crc=True`` a mismatch
        raises, so ``crc_ok`` is all true).  The Cython backend builds no per-message Python objects.
        """
        columns: MessageColumns = self.impl.decode_columns(
            data, bool(check_crc), _check_limit(max_decompressed_size)
        )
        return columns.to_arrow() if arrow else columns

    def encode_message_set(
        self,
        messages: Iterable[Any],
        *,
        magic: int = 0,
        codec: Optional[str] = None,
        base_offset: int = 0,
        snappy_framing: str = "xerial",
        timestamp_type: int = 0,
    ) -> bytes:
        """Encode messages into a magic 0 or 1 message set.

        ``messages`` are ``(key, value)`` or ``(key, value, timestamp)`` tuples or objects with ``key``,
        ``value`` (and optionally ``timestamp``) attributes; keys/values are bytes-like or ``None``.  Magic 0
        has no timestamp field (timestamps are ignored); magic 1 writes ``-1`` for a missing one.  Offsets
        are ``base_offset``, ``base_offset + 1``, ...

        With ``codec`` (``"gzip"``, ``"snappy"``, ``"lz4"``) the messages go into one compressed wrapper
        whose offset is that of the last message; inner offsets are absolute for magic 0 and relative
        (0..n-1) for magic 1, as Kafka writes them; a magic 1 wrapper carries the largest inner timestamp.
        Snappy uses xerial framing (``snappy_framing="raw"`` for plain snappy); lz4 uses Kafka's frame, with
        the broken header checksum for magic 0.  ``timestamp_type=1`` (LogAppendTime) sets attribute bit 3,
        magic 1 only.  An empty input gives ``b""``.
        """
        if magic not in (0, 1):
            raise EncodeError(f"magic must be 0 or 1, not {magic!r}")
        cid = codec_id(codec)
        if snappy_framing not in SNAPPY_FRAMINGS:
            raise EncodeError(f"snappy_framing must be 'xerial' or 'raw', not {snappy_framing!r}")
        if not isinstance(base_offset, int) or not _I64_MIN <= base_offset <= _I64_MAX:
            raise EncodeError(f"base_offset must be an int64, not {base_offset!r}")
        if timestamp_type not in (0, 1) or (timestamp_type and magic == 0):
            raise EncodeError("timestamp_type must be 0, or 1 (LogAppendTime) with magic 1")
        ts_bit = TIMESTAMP_TYPE_MASK if timestamp_type else 0
        if not cid:
            return self.impl.encode_plain(messages, magic, base_offset, ts_bit)[0]
        inner, count, max_timestamp = self.impl.encode_plain(messages, magic, base_offset if magic == 0 else 0, 0)
        if not count:
            return b""
        if base_offset + count - 1 > _I64_MAX:
            raise EncodeError(f"offsets from {base_offset} for {count} messages do not fit int64")
        payload = compress_buffer(cid, inner, magic=magic, snappy_framing=snappy_framing)
        wrapper = ((None, payload, max_timestamp),)
        return self.impl.encode_plain(wrapper, magic, base_offset + count - 1, cid | ts_bit)[0]


_active = MessageSetCodec(_impl)

#: The message type of the active backend (a Cython class or a namedtuple; same attribute names).
Message = _active.Message
decode_message_set = _active.decode_message_set
decode_columns = _active.decode_columns
encode_message_set = _active.encode_message_set
