"""The JSON form of decoded messages, and back: lossless, so ``encode`` can rebuild the exact bytes.

Conventions (documented in ``docs/cli.md``):

* Every message is an object with the field names of its class's ``to_dict()``, in wire order.
* Bytes (``bytes`` fields, record sets, undecoded bodies) are ``{"$bytes": "<base64>"}``: an object,
  so bytes can never be mistaken for a string.  A ``null`` stays ``null`` (null and empty differ).
  In the values this module makes, a record set's base64 is a :class:`Base64Text` (it equals its text),
  which the JSON writer copies to the output without ``json.dumps`` scanning it: record sets are most of
  a capture's bytes.
* With ``verbose``, a record set object also carries ``messages`` (each with ``offset``, ``magic``,
  ``attributes``, ``codec``, ``timestamp``, ``timestamp_type``, ``crc``, ``key``, ``value``),
  ``valid_bytes`` and ``partial`` — or ``error`` when its messages do not decode — and, when
  ``max_records`` cut the list, ``messages_not_shown``.  A set of magic 2 record batches (Kafka 0.11+)
  gives each message its ``headers`` (``[{"key": text, "value": bytes or null}]``; ``crc`` is null, the
  CRC-32C being the batch's) and adds ``batches``: each batch's header with the producer facts
  (``producer_id``, ``producer_epoch``, ``base_sequence``, ``transactional``, ``control``).  Consumer
  protocol bytes (JoinGroup/SyncGroup/DescribeGroups metadata and assignments) carry
  ``consumer_protocol``.  These extra keys are informational: when reading JSON back, ``$bytes`` wins.
* When reading, a record set given as ``{"messages": [...], "codec": ..., "magic": ..., "base_offset": ...}``
  without ``$bytes`` is encoded from its messages (handy for hand-written requests).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import os
import uuid
import warnings
from itertools import islice
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, TypeVar

from kproto._backend import BACKEND, FastPathMissingError, FastPathUnavailableWarning
from kproto.errors import EncodeError, KprotoError
from kproto.message_base import RECORDS, SCALARS, STRUCT, STRUCTS, Message, Struct
from kproto.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kproto.records import RecordSet, decode_message_set, decode_records, encode_message_set

__all__ = [
    "BYTES_KEY",
    "Base64Text",
    "LAZY_RECORDS_THRESHOLD",
    "RecordStream",
    "bytes_json",
    "bytes_of",
    "error_json",
    "message_json",
    "json_to_python",
    "message_from_json",
    "record_set_json",
]

BYTES_KEY = "$bytes"

#: Record sets with more messages than this are not turned into a list of JSON values: their
#: ``messages`` is a :class:`RecordStream`, decoded one message at a time as the output is written.
#: Every set is one: besides bounding memory, a stream writes its JSON text straight from the decoded
#: records (:meth:`RecordStream.json_chunks`), several times faster than building and dumping dicts.
LAZY_RECORDS_THRESHOLD = 0

# Byte fields that carry the embedded consumer protocol, by field name.
_SUBSCRIPTION_FIELDS = frozenset({"metadata", "member_metadata"})
_ASSIGNMENT_FIELDS = frozenset({"assignment", "member_assignment"})


def bytes_json(data: bytes) -> Dict[str, str]:
    """``{"$bytes": "<base64>"}``."""
    return {BYTES_KEY: base64.b64encode(data).decode("ascii")}


class Base64Text:
    """The base64 text of ``data``, made only when written: the ``$bytes`` of a record set.

    ``json.dumps`` cannot take it: the JSON writers ask for :meth:`json_bytes` (``"<base64>"`` with its
    quotes, as ``json.dumps`` of the text would give, since base64 needs no escaping).  It equals its
    text (``str()``), so code comparing JSON values sees the string it stands for.
    """

    __slots__ = ("data",)

    #: The JSON writers copy :meth:`json_chunks` as is, also in indented output (it is one string).
    json_scalar = True

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __str__(self) -> str:
        return _b64(self.data, newline=False).decode("ascii")

    def __repr__(self) -> str:
        return f"Base64Text({len(self.data)} bytes)"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Base64Text):
            return self.data == other.data
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a str, so not hashable like one

    def json_bytes(self) -> Iterator[bytes]:
        """The JSON string (with quotes) as ASCII bytes."""
        yield _BASE64_JSON(self.data)

    def json_chunks(self) -> Iterator[str]:
        """:meth:`json_bytes` as text."""
        yield _BASE64_JSON(self.data).decode("ascii")


def bytes_of(item: Dict[str, Any]) -> bytes:
    """The bytes of a ``{"$bytes": ...}`` value made by this module (its text decoded, or a record set's
    :class:`Base64Text` data)."""
    text = item[BYTES_KEY]
    return text.data if isinstance(text, Base64Text) else base64.b64decode(text)


def error_json(error: Optional[BaseException]) -> Optional[Dict[str, Any]]:
    """An exception as ``{"type", "message", "reason", "offset", "path"}`` (None stays None)."""
    if error is None:
        return None
    return {
        "type": type(error).__name__,
        "message": str(error),
        "reason": getattr(error, "reason", str(error)),
        "offset": getattr(error, "offset", None),
        "path": getattr(error, "path", ""),
    }


class RecordStream:
    """The messages of a large record set as JSON values, made one at a time while they are iterated.

    A 160 KB frame can hold a gzip set of 64 MiB; as a list of JSON values that was ~80 bytes of Python
    objects per decompressed byte.  Iterating this instead holds one message's values at a time next to
    the decoded set (whose messages the compiled core also makes on demand).  ``len()`` is the number
    of messages the set holds; iteration stops after ``limit`` of them (None: all).
    """

    __slots__ = ("_decoded", "count", "limit", "_batched")

    def __init__(self, decoded: Any, limit: Optional[int], batched: bool = False) -> None:
        self._decoded = decoded
        self.count = len(decoded)
        self.limit = limit
        self._batched = batched

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        as_json = _batched_record_json if self._batched else _record_json
        for index, message in enumerate(self._decoded):
            if self.limit is not None and index >= self.limit:
                return
            yield as_json(message)

    def json_chunks(self, chunk: int = 512) -> Iterator[str]:
        """The compact JSON text of the message list (what ``json.dumps(list(self))`` with
        ``separators=(",", ":")`` gives), ``chunk`` messages a piece, made without the dicts."""
        for piece in self.json_bytes(chunk):
            yield piece.decode("ascii")

    def json_bytes(self, chunk: int = 128) -> Iterator[bytes]:
        """:meth:`json_chunks` as ASCII bytes, for writers that can take them (no decoding and re-encoding)."""
        as_text = _RECORD_LIST_TEXT if self._batched else _MESSAGE_LIST_TEXT
        limit = self.count if self.limit is None else min(self.limit, self.count)
        if not limit:
            yield b"[]"
            return
        messages = iter(self._decoded)
        done = 0
        yield b"["
        while done < limit:
            step = min(chunk, limit - done)
            if done:
                yield b","
            yield as_text(messages, step)
            done += step
        yield b"]"


_FIELDS_IN_VERSION: Dict[Tuple[type, int], List[Any]] = {}


def _fields_in(cls: type, version: Optional[int]) -> List[Any]:
    """The ``_FIELDS`` rows of ``cls`` that the message version carries (all of them without a version)."""
    if version is None:
        return cls._FIELDS  # type: ignore[attr-defined, no-any-return]
    rows = _FIELDS_IN_VERSION.get((cls, version))
    if rows is None:
        present = {f.name for f in cls.FIELDS if f.versions[0] <= version <= f.versions[1]}  # type: ignore[attr-defined]
        rows = _FIELDS_IN_VERSION[(cls, version)] = [row for row in cls._FIELDS if row[0] in present]  # type: ignore[attr-defined]
    return rows


def message_json(
    msg: Struct, verbose: bool = False, max_records: Optional[int] = None, version: Optional[int] = None
) -> Dict[str, Any]:
    """A decoded message (or nested struct) as JSON values, following the class's field table.

    ``max_records`` (with ``verbose``) lists at most that many messages of each record set.  With the
    message's ``version``, only the fields that version carries are shown (a v0 answer does not list
    the fields Kafka added later, at their defaults).
    """
    out: Dict[str, Any] = {}
    for name, shape, _ in _fields_in(type(msg), version):
        value = getattr(msg, name)
        if value is None:
            out[name] = None
        elif shape == STRUCTS:
            out[name] = [message_json(item, verbose, max_records, version) for item in value]
        elif shape == STRUCT:
            out[name] = message_json(value, verbose, max_records, version)
        elif shape == RECORDS:
            out[name] = record_set_json(bytes(value), verbose, max_records)
        elif shape == SCALARS:
            out[name] = [
                bytes_json(v) if isinstance(v, bytes) else str(v) if isinstance(v, uuid.UUID) else v for v in value
            ]
        elif isinstance(value, bytes):
            out[name] = _bytes_field_json(name, value, verbose)
        elif isinstance(value, uuid.UUID):
            out[name] = str(value)  # from_dict takes the text form back
        else:
            out[name] = value
    return out


def _bytes_field_json(name: str, value: bytes, verbose: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = bytes_json(value)
    if verbose and value:
        schema: Optional[Type[Message]] = None
        if name in _SUBSCRIPTION_FIELDS:
            schema = ConsumerProtocolSubscription
        elif name in _ASSIGNMENT_FIELDS:
            schema = ConsumerProtocolAssignment
        if schema is not None:
            try:
                version, embedded = schema.decode_embedded(value)
            except KprotoError:
                return out  # not consumer-protocol bytes (another protocol_type): leave them opaque
            out["consumer_protocol"] = {"version": version, **message_json(embedded, version=version)}
    return out


def record_set_json(raw: bytes, verbose: bool = False, max_records: Optional[int] = None) -> Dict[str, Any]:
    """A record set: ``$bytes``, plus its decoded messages when ``verbose`` (at most ``max_records``).

    Sets larger than :data:`LAZY_RECORDS_THRESHOLD` messages get a :class:`RecordStream`, which the
    JSON writer and the text tree iterate without building the list.
    """
    out: Dict[str, Any] = {BYTES_KEY: Base64Text(raw)}
    if not verbose:
        return out
    batched = len(raw) > _MAGIC_AT and raw[_MAGIC_AT] == 2
    try:
        decoded: Any = decode_records(raw) if batched else decode_message_set(raw)
    except KprotoError as exc:
        out["error"] = error_json(exc)
        return out
    count = len(decoded)
    if count > LAZY_RECORDS_THRESHOLD:
        out["messages"] = RecordStream(decoded, max_records, batched)
    else:
        as_json = _batched_record_json if batched else _record_json
        shown = decoded if max_records is None or count <= max_records else list(decoded)[:max_records]
        out["messages"] = [as_json(m) for m in shown]
    if batched:
        out["batches"] = [_batch_json(b) for b in decoded.batches]
    if max_records is not None and count > max_records:
        out["messages_not_shown"] = count - max_records
    out["valid_bytes"] = decoded.valid_bytes
    out["partial"] = decoded.partial
    return out


#: Where the magic byte of the first entry of a record set sits (the same place for every magic).
_MAGIC_AT = 16


def _batch_json(b: Any) -> Dict[str, Any]:
    return {
        "base_offset": b.base_offset,
        "magic": b.magic,
        "records_count": b.records_count,
        "codec": b.codec or "none",
        "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch,
        "base_sequence": b.base_sequence,
        "transactional": b.is_transactional,
        "control": b.is_control,
        "partition_leader_epoch": b.partition_leader_epoch,
        "base_timestamp": b.base_timestamp,
        "max_timestamp": b.max_timestamp,
        "timestamp_type": b.timestamp_type,
    }


def _batched_record_json(m: Any) -> Dict[str, Any]:
    """A record of a magic 2 batch (a magic 0/1 entry mixed in has no headers)."""
    key, value = m.key, m.value
    return {
        "offset": m.offset,
        "magic": m.magic,
        "attributes": m.attributes,
        "codec": m.codec or "none",
        "timestamp": m.timestamp,
        "timestamp_type": m.timestamp_type,
        "crc": None,
        "key": None if key is None else bytes_json(key),
        "value": None if value is None else bytes_json(value),
        "headers": [{"key": k, "value": None if v is None else bytes_json(v)} for k, v in m.headers],
    }


# --- the same records as JSON text, written directly (RecordStream.json_chunks) ---------------------------

_b64 = binascii.b2a_base64
_json_text = json.encoder.encode_basestring_ascii  # str -> the ASCII text of a JSON string


def _bytes_text(data: Optional[bytes]) -> bytes:
    if data is None:
        return b"null"
    return b'{"$bytes":"' + _b64(data, newline=False) + b'"}'


# Rendered as ASCII bytes and decoded once per chunk: bytes %-formatting is about twice as fast as str's here.
_CODEC_TEXT = {None: b"none", "gzip": b"gzip", "snappy": b"snappy", "lz4": b"lz4", "zstd": b"zstd"}
_RECORD_TEXT = (
    b'{"offset":%d,"magic":%d,"attributes":%d,"codec":"%s","timestamp":%s,"timestamp_type":%s,'
    b'"crc":%d,"key":%s,"value":%s}'
)


def _record_text(m: Any) -> bytes:
    """:func:`_record_json` as compact JSON (ASCII bytes; on the hot path of ``pcap -v``: one format, no calls)."""
    key, value, timestamp, kind = m.key, m.value, m.timestamp, m.timestamp_type
    return _RECORD_TEXT % (
        m.offset,
        m.magic,
        m.attributes,
        _CODEC_TEXT[m.codec],
        b"null" if timestamp is None else b"%d" % timestamp,
        b"null" if kind is None else b"%d" % kind,
        m.crc,
        b"null" if key is None else b'{"$bytes":"' + _b64(key, newline=False) + b'"}',
        b"null" if value is None else b'{"$bytes":"' + _b64(value, newline=False) + b'"}',
    )


#: Header keys repeat from record to record: their JSON text is kept (up to a bound, for hostile input).
_HEADER_KEYS: Dict[str, bytes] = {}
_MAX_HEADER_KEYS = 4096


def _header_text(key: str, value: Optional[bytes]) -> bytes:
    start = _HEADER_KEYS.get(key)
    if start is None:
        start = b'{"key":' + _json_text(key).encode("ascii") + b',"value":'
        if len(_HEADER_KEYS) < _MAX_HEADER_KEYS:
            _HEADER_KEYS[key] = start
    return start + (b"null" if value is None else b'{"$bytes":"' + _b64(value, newline=False) + b'"}') + b"}"


_BATCHED_TEXT = (
    b'{"offset":%d,"magic":%d,"attributes":%d,"codec":"%s","timestamp":%s,"timestamp_type":%s,'
    b'"crc":null,"key":%s,"value":%s,"headers":[%s]}'
)


def _batched_record_text(m: Any) -> bytes:
    """:func:`_batched_record_json` as compact JSON (ASCII bytes)."""
    headers = m.headers
    if not headers:
        header_text = b""
    elif len(headers) == 1:
        header_text = _header_text(*headers[0])
    else:
        header_text = b",".join([_header_text(k, v) for k, v in headers])
    key, value, timestamp, kind = m.key, m.value, m.timestamp, m.timestamp_type
    return _BATCHED_TEXT % (
        m.offset,
        m.magic,
        m.attributes,
        _CODEC_TEXT[m.codec],
        b"null" if timestamp is None else b"%d" % timestamp,
        b"null" if kind is None else b"%d" % kind,
        b"null" if key is None else b'{"$bytes":"' + _b64(key, newline=False) + b'"}',
        b"null" if value is None else b'{"$bytes":"' + _b64(value, newline=False) + b'"}',
        header_text,
    )


def message_list_text(messages: Iterator[Any], count: int) -> bytes:
    """The next ``count`` magic 0/1 messages of ``messages`` as compact JSON objects, comma-separated.

    The pure twin of ``kproto._fast._record_json.message_list_json``; the contract both keep: the
    text is ASCII bytes, exactly ``",".join`` of each message's :func:`_record_json` dumped compactly
    (``json.dumps(..., separators=(",", ":"))``), and exactly ``count`` items are taken from the
    iterator (fewer when it ends).  ``tests/test_cli_record_json.py`` holds the two to it.
    """
    return b",".join([_record_text(m) for m in islice(messages, count)])


def record_list_text(records: Iterator[Any], count: int) -> bytes:
    """:func:`message_list_text` for records of any magic, with headers (:func:`_batched_record_json`);
    the pure twin of ``kproto._fast._record_json.record_list_json``."""
    return b",".join([_batched_record_text(m) for m in islice(records, count)])


def _compiled_record_text() -> Optional[Any]:
    """The compiled twin of the two functions above when the compiled backend runs (see kproto._backend)."""
    if BACKEND != "cython":
        return None
    try:
        compiled = importlib.import_module("kproto._fast._record_json")
    except ImportError as exc:
        if os.environ.get("KPROTO_REQUIRE_FAST") == "1":
            raise FastPathMissingError(
                f"KPROTO_REQUIRE_FAST=1 but kproto._fast._record_json does not import: {exc}"
            ) from exc
        warnings.warn(
            f"kproto._fast._record_json is unavailable ({exc}): pcap -v writes records in pure Python "
            "(rebuild the extensions with `python setup.py build_ext --inplace`)",
            FastPathUnavailableWarning,
            stacklevel=2,
        )
        return None
    return compiled


def base64_json(data: bytes) -> bytes:
    """``data`` as a JSON string of its base64 (with the quotes, ASCII bytes); the pure twin of
    ``kproto._fast._record_json.base64_json``."""
    return b'"' + _b64(data, newline=False) + b'"'


_compiled = _compiled_record_text()
#: The renderers RecordStream.json_bytes and Base64Text use: compiled when the compiled backend runs.
_MESSAGE_LIST_TEXT = message_list_text if _compiled is None else _compiled.message_list_json
_RECORD_LIST_TEXT = record_list_text if _compiled is None else _compiled.record_list_json
_BASE64_JSON = base64_json if _compiled is None else _compiled.base64_json


def _record_json(m: Any) -> Dict[str, Any]:
    return {
        "offset": m.offset,
        "magic": m.magic,
        "attributes": m.attributes,
        "codec": m.codec or "none",
        "timestamp": m.timestamp,
        "timestamp_type": m.timestamp_type,
        "crc": m.crc,
        "key": None if m.key is None else bytes_json(m.key),
        "value": None if m.value is None else bytes_json(m.value),
    }


# --- reading JSON back ------------------------------------------------------------------------------------


def json_to_python(value: Any, where: str = "") -> Any:
    """Undo the JSON conventions: ``{"$bytes"}`` objects become bytes, message lists become record sets."""
    if isinstance(value, dict):
        if BYTES_KEY in value:
            return _decode_base64(value[BYTES_KEY], where)
        if "messages" in value and isinstance(value["messages"], list):
            return _record_set_from_messages(value, where)
        return {k: json_to_python(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [json_to_python(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _decode_base64(text: Any, where: str) -> bytes:
    if isinstance(text, Base64Text):
        return text.data
    if not isinstance(text, str):
        raise EncodeError(f"{where}: {BYTES_KEY} must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EncodeError(f"{where}: bad base64 in {BYTES_KEY}: {exc}") from None


def _record_set_from_messages(value: Dict[str, Any], where: str) -> RecordSet:
    messages: List[tuple] = []
    for i, item in enumerate(value["messages"]):
        if not isinstance(item, dict):
            raise EncodeError(f"{where}.messages[{i}]: expected an object with key and value")
        key = json_to_python(item.get("key"), f"{where}.messages[{i}].key")
        data = json_to_python(item.get("value"), f"{where}.messages[{i}].value")
        messages.append((_as_binary(key), _as_binary(data), item.get("timestamp")))
    codec = value.get("codec")
    raw = encode_message_set(
        messages,
        magic=value.get("magic", 0),
        codec=None if codec == "none" else codec,
        base_offset=value.get("base_offset", 0),
    )
    return RecordSet(raw)


def _as_binary(value: Any) -> Optional[bytes]:
    """Keys and values written by hand may be plain strings: take their UTF-8 bytes."""
    return value.encode("utf-8") if isinstance(value, str) else value


_M = TypeVar("_M", bound=Message)


def message_from_json(cls: Type[_M], data: Any, where: str) -> _M:
    """An instance of ``cls`` from its JSON form (see :func:`message_json`)."""
    if not isinstance(data, dict):
        raise EncodeError(f"{where}: expected an object for {cls.__name__}")
    return cls.from_dict(json_to_python(data, where))
