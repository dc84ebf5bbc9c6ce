"""The value of a ``records`` field: records (any magic) kept as the raw bytes seen on the wire.

The generated request/response codecs store a :class:`RecordSet` for every ``records`` (MessageSet) field.
Keeping the bytes untouched means a response decoded and re-encoded is byte-identical, and nobody pays for
decoding messages they never look at: messages are decoded only on iteration or :meth:`RecordSet.decode`.

This module imports nothing of kproto beyond :mod:`kproto.errors` at import time, because the generated
codecs import it and must stay importable on their own.  Like the codecs, it is compiled by Cython as it is
(``record_set.pxd`` makes the class an extension type): every decoded ``records`` field builds one, and a
Python-level class cost a Fetch response of ten partitions a tenth of its decode time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Union

if TYPE_CHECKING:  # pragma: no cover - typing only
    from kproto.records.decoded import DecodedRecords, MessageLike, MessageSet

__all__ = ["RecordSet"]


class RecordSet:
    """A message set as raw wire bytes, decoded lazily.

    ``RecordSet(raw)`` wraps bytes exactly as they appear on the wire (without the int32 size prefix the
    enclosing request/response carries).  ``bytes(rs)``/``rs.raw`` give them back unchanged, ``len(rs)`` is
    their length, two record sets are equal when their bytes are.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: Union[bytes, bytearray, memoryview] = b"") -> None:
        self._raw = raw if type(raw) is bytes else bytes(raw)

    @property
    def raw(self) -> bytes:
        """The message set bytes exactly as on the wire."""
        return self._raw

    def __bytes__(self) -> bytes:
        return self._raw

    def __len__(self) -> int:
        return len(self._raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordSet):
            return self._raw == other._raw
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._raw)

    def __reduce__(self) -> Any:
        # One pickled form for both builds (the compiled class has no instance dict or slots to copy), by a
        # function both builds define under this module's name (the compiled class is named after its copy).
        return (_from_raw, (self._raw,))

    def __repr__(self) -> str:
        return f"RecordSet({len(self._raw)} bytes)"

    def decode(self, **options: Any) -> "MessageSet":
        """Decode magic 0/1 messages (see :func:`kproto.records.decode_message_set` for ``options``)."""
        from kproto.records.codec import decode_message_set

        return decode_message_set(self._raw, **options)

    def records(self, **options: Any) -> "DecodedRecords":
        """Decode the records of any magic, 0, 1 or 2 mixed (see :func:`kproto.records.decode_records`)."""
        from kproto.records.codec import decode_records

        return decode_records(self._raw, **options)

    def __iter__(self) -> Iterator["MessageLike"]:
        return iter(self.decode())

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Any],
        *,
        magic: int = 0,
        codec: Optional[str] = None,
        base_offset: int = 0,
        **options: Any,
    ) -> "RecordSet":
        """Encode ``messages`` (see :func:`kproto.records.encode_message_set`) into a new record set."""
        from kproto.records.codec import encode_message_set

        return cls(encode_message_set(messages, magic=magic, codec=codec, base_offset=base_offset, **options))

    @classmethod
    def from_records(cls, records: Iterable[Any], **options: Any) -> "RecordSet":
        """Encode ``records`` as one magic 2 batch (see :func:`kproto.records.encode_record_batch`)."""
        from kproto.records.codec import encode_record_batch

        return cls(encode_record_batch(records, **options))


def _from_raw(raw: bytes) -> RecordSet:
    """Unpickle a :class:`RecordSet`."""
    return RecordSet(raw)


# Last, once every name is defined: where the build compiled a copy of this module, that copy's names take
# the place of these (see kproto._backend.adopt_compiled_copy); KPROTO_PURE=1 keeps these.
from kproto._backend import adopt_compiled_copy  # noqa: E402  (it loads the record core, which may import this module)

adopt_compiled_copy(globals())
