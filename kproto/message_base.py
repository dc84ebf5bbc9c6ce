"""Behaviour shared by every generated struct and message class.

A generated class declares its layout as data (``_FIELDS``, ``_DECODERS``, ``_ENCODERS``); this base class
turns that into value equality, a readable repr, lossless ``to_dict``/``from_dict`` and the public
``encode``/``decode`` entry points.  The per-version codec functions themselves live in the generated
modules, where they can be compiled.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Type, TypeVar, Union

try:
    import cython  # compiled: the encode buffer below is kept between calls
except ImportError:  # pure Python without Cython installed

    class cython:  # type: ignore[no-redef]
        compiled = False


from kproto.errors import DecodeError, EncodeError, KprotoError, UnknownVersionError, UnsupportedVersionError
from kproto.records.record_set import RecordSet
from kproto.wire import I16, encode_failure, trailing_bytes

__all__ = ["Cursor", "FieldInfo", "Struct", "Message", "as_record_set"]

S = TypeVar("S", bound="Struct")
M = TypeVar("M", bound="Message")

#: How a field is shaped, for the generic methods: a scalar (int/bool/str/bytes), a record set, a list of
#: structs or a list of scalars.
SCALAR, RECORDS, STRUCT, STRUCTS, SCALARS = "scalar", "records", "struct", "structs", "scalars"


# The functional form: compiled by Cython, a class-syntax NamedTuple would lose its annotations.
FieldInfo = NamedTuple(
    "FieldInfo",
    [
        ("name", str),
        ("versions", Tuple[int, int]),
        ("tag", Optional[int]),
        ("entity_type", Optional[str]),
        ("is_array", bool),
        ("struct", Optional[type]),
        ("nullable_versions", Optional[Tuple[int, int]]),
        ("type", str),
    ],
)
FieldInfo.__doc__ = """One field of a generated class, in wire order (the class attribute ``FIELDS``).

``name``: the Python attribute; ``versions``: the inclusive (lowest, highest) versions carrying it,
clipped to the message's valid versions; ``tag``: its tag when it travels as a tagged field (in the
versions of the spec's ``taggedVersions``), else None; ``entity_type``: what the value names
(``topicName``, ``groupId``, ``brokerId``, ``partitionIndex``, ``errorCode``, ...) or None;
``is_array``: a list of values; ``struct``: the nested struct class (of the elements, for an array) or
None; ``nullable_versions``: the (lowest, highest) versions that allow null, or None; ``type``: the
spec's type text (``int32``, ``[]string``, ``[]FetchTopic``, ``records``, ...)."""

Decoder = Callable[[bytes, "Cursor", int], Any]
Encoder = Callable[[Any, bytearray], None]


def as_record_set(value: Union[None, RecordSet, bytes, bytearray, memoryview]) -> Optional[RecordSet]:
    """Accept raw bytes wherever a record set is expected."""
    if value is None or type(value) is RecordSet:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return RecordSet(value)
    if isinstance(value, RecordSet):
        return value
    raise EncodeError(f"a record set must be RecordSet, bytes or None, not {type(value).__name__}")


#: Compiled: the bytearray the last ``encode`` gave back, emptied with its memory kept, for the next one
#: (a small message's encode otherwise spends about as long allocating and growing its buffer as writing
#: it).  Taken (set to None) while in use, so a nested or concurrent encode gets a fresh one.
_spare = None  # type: Optional[bytearray]
#: The largest buffer kept between encodes (a bigger one is left to the garbage collector).
_SPARE_MAX = 1 << 16


def _take_buffer() -> bytearray:
    """An empty bytearray to encode into: compiled, the one :func:`_buffer_bytes` gave back, if any."""
    global _spare
    out = _spare
    if out is None:
        return bytearray()
    _spare = None
    return out


def _buffer_bytes(out: bytearray) -> bytes:
    """The bytes written into ``out``; compiled, ``out`` is then emptied and kept for the next encode
    (unless something still views it or it is larger than ``_SPARE_MAX``)."""
    global _spare
    if cython.compiled:
        data = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(out), PyByteArray_GET_SIZE(out))
        if _reusable(out, _SPARE_MAX):
            _empty(out)
            _spare = out
        return data
    return bytes(out)


class Cursor:
    """The read position shared by the decoders of one message (compiled: a C field, no allocation).

    Nested decoders advance it instead of returning (object, position) pairs, which would cost two
    allocations per array element.
    """

    __slots__ = ("pos",)

    def __init__(self, pos: int = 0) -> None:
        self.pos = pos


def _as_uuid(value: Any, where: str) -> Any:
    """UUID fields from their text form (as JSON carries them); lists element by element."""
    if isinstance(value, list):
        return [_as_uuid(item, where) for item in value]
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            raise EncodeError(f"{where}: {value!r} is not a UUID") from None
    return value


def _rebuild(cls: Any, values: Tuple[Any, ...], unknown: Any) -> Any:
    """Unpickle a generated struct or message (see :meth:`Struct.__reduce__`)."""
    obj = cls.__new__(cls)
    for (name, _, _), value in zip(cls._FIELDS, values):
        setattr(obj, name, value)
    if unknown is not None:
        obj.unknown_tagged_fields = unknown
    return obj


class Struct:
    """Base of every generated struct: value semantics driven by the class's ``_FIELDS`` table."""

    __slots__ = ()
    # Class attributes set by each generated class (no annotations here: compiled, these classes are
    # extension types, where an annotated name would declare a C attribute):
    # _FIELDS: (attribute, shape, struct class or None) in wire order; _NAME: the dotted class name.
    # FIELDS: FieldInfo rows in wire order (the public, spec-derived table).
    _FIELDS = ()
    FIELDS = ()
    _NAME = "Struct"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name, _, _ in self._FIELDS) and getattr(
            self, "unknown_tagged_fields", None
        ) == getattr(other, "unknown_tagged_fields", None)

    __hash__ = None  # type: ignore[assignment]  # mutable values

    def __reduce__(self) -> Tuple[Any, ...]:
        # One pickling rule for both builds (the compiled classes are built without Cython's per-class
        # pickling code, which would be a large share of the generated C).
        values = tuple(getattr(self, name) for name, _, _ in self._FIELDS)
        return (_rebuild, (type(self), values, getattr(self, "unknown_tagged_fields", None)))

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name, _, _ in self._FIELDS)
        unknown = getattr(self, "unknown_tagged_fields", None)
        if unknown:
            parts += f", unknown_tagged_fields={unknown!r}"
        return f"{self._NAME}({parts})"

    def to_dict(self) -> Dict[str, Any]:
        """Fields in wire order as plain values: nested dicts and lists; record sets as their raw bytes."""
        out: Dict[str, Any] = {}
        for name, shape, _ in self._FIELDS:
            value = getattr(self, name)
            if shape == STRUCTS:
                value = None if value is None else [item.to_dict() for item in value]
            elif shape == STRUCT:
                value = None if value is None else value.to_dict()
            elif shape == SCALARS:
                value = None if value is None else list(value)
            elif shape == RECORDS and value is not None:
                value = value.raw if isinstance(value, RecordSet) else bytes(value)
            out[name] = value
        return out

    @classmethod
    def _uuid_fields(cls) -> Tuple[str, ...]:
        return tuple(info.name for info in cls.FIELDS if info.type in ("uuid", "[]uuid"))

    @classmethod
    def from_dict(cls: Type[S], data: Dict[str, Any]) -> S:
        """The inverse of :meth:`to_dict`; missing keys take their defaults, unknown keys are an error."""
        if not isinstance(data, dict):
            raise EncodeError(f"{cls._NAME}.from_dict needs a dict, not {type(data).__name__}")
        known = {name: (shape, sub) for name, shape, sub in cls._FIELDS}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise EncodeError(f"{cls._NAME}: unknown field(s) {', '.join(unknown)}")
        kwargs: Dict[str, Any] = {}
        for name, value in data.items():
            shape, sub = known[name]
            if shape == STRUCTS and value is not None:
                if not isinstance(value, list):
                    raise EncodeError(f"{cls._NAME}.{name}: expected a list")
                value = [item if isinstance(item, sub) else sub.from_dict(item) for item in value]
            elif shape == STRUCT and isinstance(value, dict):
                value = sub.from_dict(value)
            elif name in cls._uuid_fields() and value is not None:
                value = _as_uuid(value, f"{cls._NAME}.{name}")
            kwargs[name] = value
        return cls(**kwargs)


class Message(Struct):
    """Base of every generated request, response, header and embedded schema.

    ``encode(version)`` gives the body bytes; ``decode(data, version)`` parses body bytes, and bytes left
    over after the last field are an error.
    """

    __slots__ = ()
    # API_KEY (int or None), KIND ("request", "response", "header", "data"), VERSIONS ((lowest, highest)),
    # _DECODERS / _ENCODERS (version -> codec function) are set by each generated class.
    # VALID_VERSIONS ((lowest, highest)), FLEXIBLE_VERSIONS and DEPRECATED_VERSIONS ((lowest, highest) or
    # None) come from the spec; VERSIONS is the older name of VALID_VERSIONS.
    API_KEY = None
    KIND = ""
    VERSIONS = (0, 0)
    VALID_VERSIONS = (0, 0)
    FLEXIBLE_VERSIONS = None
    DEPRECATED_VERSIONS = None
    _DECODERS = {}  # type: Dict[int, Decoder]
    _ENCODERS = {}  # type: Dict[int, Encoder]

    @classmethod
    def _unsupported(cls, version: object) -> UnsupportedVersionError:
        lo, hi = cls.VERSIONS
        return UnsupportedVersionError(f"{cls._NAME} has no version {version!r} (valid: {lo}-{hi})")

    @classmethod
    def _unknown(cls, version: object, pos: int) -> UnknownVersionError:
        lo, hi = cls.VERSIONS
        return UnknownVersionError(f"{cls._NAME} has no version {version!r} (valid: {lo}-{hi})", pos, "api_version")

    @classmethod
    def decode(cls: Type[M], data: Union[bytes, bytearray, memoryview], version: int) -> M:
        """Decode a body of exactly ``len(data)`` bytes; raises :class:`~kproto.errors.DecodeError`."""
        buf = data if type(data) is bytes else bytes(data)
        # decode_from's steps without its (object, position) pair and bounds check: the whole buffer is
        # the body, and a small message's decode is only a few times the cost of those.
        decoder = cls._DECODERS.get(version)
        if decoder is None:
            raise cls._unknown(version, 0)
        cursor = Cursor(0)
        obj: M = decoder(buf, cursor, len(buf))
        if cursor.pos != len(buf):
            raise trailing_bytes(f"{cls._NAME} v{version}", cursor.pos, len(buf))
        return obj

    @classmethod
    def decode_from(cls: Type[M], buf: bytes, pos: int, end: int, version: int) -> Tuple[M, int]:
        """Decode starting at ``pos`` without reading past ``end``; return the object and the end position.

        Offsets in errors are positions in ``buf``, so a body decoded inside a frame reports frame offsets.
        """
        decoder = cls._DECODERS.get(version)
        if decoder is None:
            raise cls._unknown(version, pos)
        if type(buf) is not bytes:
            buf = bytes(buf)
        if not 0 <= pos <= end <= len(buf):
            # The generated decoders trust ``end`` (compiled, they read the buffer directly): check it once here.
            raise ValueError(
                f"decode_from needs 0 <= pos <= end <= len(buf), got pos={pos}, end={end}, len(buf)={len(buf)}"
            )
        cursor = Cursor(pos)
        obj = decoder(buf, cursor, end)
        return obj, cursor.pos

    @classmethod
    def decode_embedded(cls: Type[M], data: Union[bytes, bytearray, memoryview]) -> Tuple[int, M]:
        """``(version, message)`` from bytes that start with their own int16 version (the consumer
        protocol's schemas).  A newer version than kproto knows is read with the newest layout it knows
        and its extra trailing bytes are ignored, as 0.9 clients did; an older one is an error."""
        if not getattr(cls, "VERSION_PREFIX", False):
            raise TypeError(f"{cls._NAME} does not carry its own version")
        buf = data if type(data) is bytes else bytes(data)
        if len(buf) < 2:
            raise DecodeError(f"need 2 bytes at offset 0, {len(buf)} left", 0, "version")
        version = I16.unpack_from(buf, 0)[0]
        lo, hi = cls.VERSIONS
        if version < lo:
            raise DecodeError(f"{cls._NAME} version {version} is below {lo}", 0, "version")
        obj, pos = cls.decode_from(buf, 2, len(buf), min(version, hi))
        if version <= hi and pos != len(buf):
            raise trailing_bytes(f"{cls._NAME} v{version}", pos, len(buf))
        return version, obj

    def encode_embedded(self, version: int = 0) -> bytes:
        """The int16 version followed by the body (the inverse of :meth:`decode_embedded`)."""
        if not getattr(self, "VERSION_PREFIX", False):
            raise TypeError(f"{self._NAME} does not carry its own version")
        out = bytearray(I16.pack(version))
        self.encode_into(out, version)
        return bytes(out)

    def encode(self, version: int) -> bytes:
        """The body bytes of this message in ``version``."""
        # encode_into's steps, inline: a small message's whole encode costs only a few times a second
        # method call and a ``dict.get`` lookup (a compiled HeartbeatRequest v0: about 0.1 us).
        try:
            encoder = self._ENCODERS[version]
        except KeyError:
            raise self._unsupported(version) from None
        if cython.compiled:
            out = _take_buffer()
        else:
            out = bytearray()
        try:
            encoder(self, out)
        except KprotoError:
            raise
        except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise self._encode_error(version, exc) from exc
        if cython.compiled:
            return _buffer_bytes(out)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append the body to ``out`` (lets framing put the size and header in front without a copy)."""
        try:
            encoder = self._ENCODERS[version]
        except KeyError:
            raise self._unsupported(version) from None
        try:
            encoder(self, out)
        except KprotoError:
            raise
        except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise self._encode_error(version, exc) from exc

    def _encode_error(self, version: int, exc: Exception) -> EncodeError:
        """The error for a value of the wrong type or out of range for its wire type: find which (the
        encoders do not track paths, so that good input pays nothing for it)."""
        what = f"{self._NAME} v{version}"
        bad = _bad_field(self, version, self._NAME)
        if bad is None:
            return encode_failure(what, exc, self._NAME)
        path, expected, got = bad
        return EncodeError(f"expected {expected}, got {got} (encoding {what})", path)


_INT_RANGES = {
    "int8": (-(1 << 7), 1 << 7),
    "int16": (-(1 << 15), 1 << 15),
    "uint16": (0, 1 << 16),
    "int32": (-(1 << 31), 1 << 31),
    "int64": (-(1 << 63), 1 << 63),
}
#: What a field of each wire type takes, as an error message says it.
_EXPECTED = {
    "float64": "a float",
    "string": "a string",
    "bytes": "bytes",
    "records": "a RecordSet or bytes",
    "uuid": "a UUID",
    **{kind: f"an {kind} ({lo}..{hi - 1})" if kind[0] in "iu" else kind for kind, (lo, hi) in _INT_RANGES.items()},
}
_EXPECTED["uint16"] = f"a uint16 (0..{(1 << 16) - 1})"


def _fits(kind: str, value: Any) -> bool:
    """Whether one value can be written as ``kind`` (nullness is checked by the encoders themselves)."""
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return isinstance(value, int) and lo <= value < hi
    if kind == "float64":
        return isinstance(value, (int, float))
    if kind == "string":
        return value is None or isinstance(value, str)
    if kind in ("bytes", "records"):
        return value is None or isinstance(value, (bytes, bytearray, memoryview, RecordSet))
    if kind == "uuid":
        return isinstance(value, uuid.UUID)
    return True  # bool: any value has a truth value


def _bad_field(obj: Any, version: int, path: str) -> Optional[Tuple[str, str, str]]:
    """``(path, what the field takes, what it holds)`` of the first field of ``obj`` (in ``version``) whose
    value cannot be written, or None when every field looks writable."""
    for info in type(obj).FIELDS:
        lo, hi = info.versions
        if not lo <= version <= hi:
            continue
        value = getattr(obj, info.name)
        here = f"{path}.{info.name}"
        if value is None:
            continue
        if info.is_array and not isinstance(value, list):
            return here, "a list", type(value).__name__
        items = value if info.is_array else [value]
        for i, item in enumerate(items):
            where = f"{here}[{i}]" if info.is_array else here
            if info.struct is not None:
                if not isinstance(item, info.struct):
                    return where, f"a {info.struct._NAME}", type(item).__name__
                inner = _bad_field(item, version, where)
                if inner is not None:
                    return inner
            else:
                kind = info.type.lstrip("[]")
                if not _fits(kind, item):
                    # An int of the wrong size is shown by value, anything else by type.
                    out_of_range = kind in _INT_RANGES and isinstance(item, int)
                    return where, _EXPECTED.get(kind, kind), repr(item) if out_of_range else type(item).__name__
    return None


# Last, once every name is defined: where the build compiled a copy of this module, that copy's names take
# the place of these (see kproto._backend.adopt_compiled_copy); KPROTO_PURE=1 keeps these.
from kproto._backend import adopt_compiled_copy  # noqa: E402  (it loads the record core, which may import this module)

adopt_compiled_copy(globals())
