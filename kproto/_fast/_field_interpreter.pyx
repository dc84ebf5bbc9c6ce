# cython: language_level=3
"""One compiled codec for every API without specialised compiled codecs: a loop over field tables.

:func:`bind` gives a message class whose codecs are plain Python functions (the pure target) an
interpreter entry per version in ``_DECODERS``/``_ENCODERS``, with the same call shapes, so that
``kproto.message_base.Message``'s entry points run it unchanged.  Each entry walks the table of
:mod:`kproto.field_tables` with the C readers and writers of the generated codecs.

The fast path only checks bounds and shapes.  On anything it does not accept (short input, a bad length,
invalid UTF-8, a value of the wrong type or range, a tag a version refuses, a field set in a version that
cannot carry it) it gives up and runs the class's pure codec over the same input, which raises the very
error the pure build raises (same type, message, offset and field path), or returns its result where
the rule was the pure codec's to judge (an ignorable field, a tuple given for a list).  The pure codecs
are the reference: the interpreter never explains an error itself.
"""

from cpython.long cimport PyLong_Check
from cpython.float cimport PyFloat_Check

from kproto._generated._c_wire cimport (
    _grow, _put_b, _put_bytes, _put_d, _put_h, _put_H, _put_i, _put_q, _put_text, _put_uvarint,
    _read_b, _read_d, _read_h, _read_H, _read_i, _read_q, _read_str, _read_uvarint, _utf8,
)

from uuid import UUID

from kproto.message_base import as_record_set
from kproto.records.record_set import RecordSet
from kproto.wire import put_tag_section, read_tag_section, uuid_at

__all__ = ["bind", "Decoder", "Encoder", "GiveUp"]

DEF K_ABSENT = 0
DEF K_BOOL = 1
DEF K_INT8 = 2
DEF K_INT16 = 3
DEF K_UINT16 = 4
DEF K_INT32 = 5
DEF K_INT64 = 6
DEF K_FLOAT64 = 7
DEF K_STRING = 8
DEF K_BYTES = 9
DEF K_UUID = 10
DEF K_RECORDS = 11
DEF K_STRUCT = 12
DEF D_VALUE = 0
DEF D_LIST = 1
DEF D_STRUCT = 2
DEF MAX_STRING = 32767


class GiveUp(Exception):
    """The fast path does not take this input: the pure codec decides (never leaves this module but
    through :meth:`Decoder.fast` and :meth:`Encoder.fast`, which the tests use)."""


cdef object _GIVE_UP = GiveUp()


cdef class _Field:
    cdef int kind
    cdef str attr
    cdef bint is_array, nullable
    cdef _Layout sub
    cdef long tag
    cdef int dkind
    cdef object dvalue


cdef class _Layout:
    cdef object cls
    cdef str name
    cdef bint flexible, has_unknown
    cdef list fields  # in the fixed part, wire order
    cdef list tagged  # in the tag section
    cdef list absent  # not carried by this version
    cdef tuple known_tags
    cdef frozenset other_tags


cdef dict _layouts = {}
#: ``kproto.field_tables.table``, handed over by :func:`bind` (that module imports this one).
cdef object _table = None


cdef _Layout _layout(object cls, int version, bint flexible, bint has_unknown):
    key = (cls, version)
    cdef _Layout lay = _layouts.get(key)
    if lay is not None:
        return lay
    name, flexible, has_unknown, rows, other_tags = _table(cls, version, flexible, has_unknown)
    lay = _Layout()
    lay.cls, lay.name, lay.flexible, lay.has_unknown = cls, name, flexible, has_unknown
    lay.fields, lay.tagged, lay.absent = [], [], []
    lay.other_tags = other_tags
    cdef _Field f
    for kind, attr, is_array, nullable, sub, tag, dkind, dvalue in rows:
        f = _Field()
        f.kind, f.attr, f.is_array, f.nullable, f.tag, f.dkind, f.dvalue = kind, attr, is_array, nullable, tag, dkind, dvalue
        if sub is not None:
            f.sub = _layout(sub, version, flexible, has_unknown)
        if kind == K_ABSENT:
            lay.absent.append(f)
        elif tag >= 0:
            lay.tagged.append(f)
        else:
            lay.fields.append(f)
    lay.known_tags = tuple([(<_Field>t).tag for t in lay.tagged])
    _layouts[key] = lay
    return lay


cdef inline object _default(_Field f):
    if f.dkind == D_LIST:
        return []
    if f.dkind == D_STRUCT:
        return f.dvalue()
    return f.dvalue


# ---- decoding: each reader takes the position by pointer and raises GiveUp on anything unexpected


cdef inline Py_ssize_t _need(Py_ssize_t* pos, Py_ssize_t end, Py_ssize_t size) except -1:
    cdef Py_ssize_t at = pos[0]
    if size < 0 or end - at < size:
        raise _GIVE_UP
    pos[0] = at + size
    return at


cdef inline long long _length(bytes buf, Py_ssize_t* pos, Py_ssize_t end, bint compact, int width) except? -2:
    """A length or count: compact, an unsigned varint minus one; else a signed int16/int32. -1 is null."""
    cdef long long v
    if compact:
        v = _read_uvarint(buf, pos[0], end)
        if v < 0:
            raise _GIVE_UP
        pos[0] += v & 15
        return (v >> 4) - 1
    if width == 2:
        return _read_h(buf, _need(pos, end, 2))
    return _read_i(buf, _need(pos, end, 4))


cdef object _dec_value(int kind, _Layout sub, bint nullable, bint compact, bytes buf, Py_ssize_t* pos, Py_ssize_t end):
    cdef Py_ssize_t at
    cdef long long n
    cdef signed char b
    if kind == K_INT32:
        return _read_i(buf, _need(pos, end, 4))
    if kind == K_STRING or kind == K_BYTES or kind == K_RECORDS:
        n = _length(buf, pos, end, compact, 2 if kind == K_STRING else 4)
        if n == -1 and nullable:
            return None
        at = _need(pos, end, n)
        if kind == K_STRING:
            text = _read_str(buf, at, n) if n else ""
            if text is None:
                raise _GIVE_UP
            return text
        if kind == K_BYTES:
            return buf[at:at + n]
        return RecordSet(buf[at:at + n])
    if kind == K_INT16:
        return _read_h(buf, _need(pos, end, 2))
    if kind == K_INT64:
        return _read_q(buf, _need(pos, end, 8))
    if kind == K_BOOL:
        b = _read_b(buf, _need(pos, end, 1))
        if b != 0 and b != 1:
            raise _GIVE_UP
        return b == 1
    if kind == K_INT8:
        return _read_b(buf, _need(pos, end, 1))
    if kind == K_UUID:
        return uuid_at(buf, _need(pos, end, 16))
    if kind == K_UINT16:
        return _read_H(buf, _need(pos, end, 2))
    if kind == K_FLOAT64:
        return _read_d(buf, _need(pos, end, 8))
    if kind == K_STRUCT:
        if nullable:
            b = _read_b(buf, _need(pos, end, 1))
            if b == -1:
                return None
            if b != 1:
                raise _GIVE_UP
        return _dec_struct(sub, buf, pos, end)
    raise _GIVE_UP


cdef object _dec_field(_Field f, bint compact, bytes buf, Py_ssize_t* pos, Py_ssize_t end):
    cdef long long n, i
    cdef list items
    if not f.is_array:
        return _dec_value(f.kind, f.sub, f.nullable, compact, buf, pos, end)
    n = _length(buf, pos, end, compact, 4)
    if n == -1 and f.nullable:
        return None
    if n < 0 or n > end - pos[0]:  # every element takes at least one byte
        raise _GIVE_UP
    items = []
    for i in range(n):
        items.append(_dec_value(f.kind, f.sub, False, compact, buf, pos, end))
    return items


cdef object _dec_struct(_Layout lay, bytes buf, Py_ssize_t* pos, Py_ssize_t end):
    cdef _Field f
    cdef Py_ssize_t t_start, t_end
    obj = lay.cls.__new__(lay.cls)
    for f in lay.fields:
        setattr(obj, f.attr, _dec_field(f, lay.flexible, buf, pos, end))
    for f in lay.absent:
        setattr(obj, f.attr, _default(f))
    if not lay.flexible:
        if lay.has_unknown:
            obj.unknown_tagged_fields = []
        return obj
    for f in lay.tagged:
        setattr(obj, f.attr, _default(f))
    if pos[0] < end and (<const unsigned char*>buf)[pos[0]] == 0:
        pos[0] += 1
        obj.unknown_tagged_fields = []
        return obj
    try:
        unknown, spans, after = read_tag_section(buf, pos[0], end, lay.known_tags)
    except Exception:
        raise _GIVE_UP
    for tag, _ in unknown:
        if tag in lay.other_tags:
            raise _GIVE_UP
    for tag, t_start, t_end in spans:
        for f in lay.tagged:
            if f.tag == tag:
                pos[0] = t_start
                setattr(obj, f.attr, _dec_field(f, True, buf, pos, t_end))
                if pos[0] != t_end:
                    raise _GIVE_UP
                break
    pos[0] = after
    obj.unknown_tagged_fields = unknown
    return obj


# ---- encoding


cdef inline long long _int(object value, long long lo, long long hi) except? -1:
    cdef long long v
    if not PyLong_Check(value):
        raise _GIVE_UP
    try:
        v = value
    except OverflowError:
        raise _GIVE_UP
    if v < lo or v > hi:
        raise _GIVE_UP
    return v


cdef int _put_length(bytearray out, long long n, bint compact, int width) except -1:
    if compact:
        _put_uvarint(out, <unsigned int>(n + 1))
    elif width == 2:
        _put_h(_grow(out, 2), 0, <short>n)
    else:
        _put_i(_grow(out, 4), 0, <int>n)
    return 0


cdef int _enc_value(int kind, _Layout sub, bint nullable, bint compact, object value, bytearray out) except -1:
    cdef Py_ssize_t n
    cdef double d
    if kind == K_INT32:
        _put_i(_grow(out, 4), 0, <int>_int(value, -2147483648LL, 2147483647LL))
    elif kind == K_STRING or kind == K_BYTES or kind == K_RECORDS:
        if value is None:
            if not nullable:
                raise _GIVE_UP
            _put_length(out, -1, compact, 2 if kind == K_STRING else 4)
            return 0
        if kind == K_STRING:
            if type(value) is not str:
                raise _GIVE_UP
            data = _utf8(value)
            n = len(data)
            if n > MAX_STRING:
                raise _GIVE_UP
        elif kind == K_BYTES:
            if type(value) is not bytes and type(value) is not bytearray:
                raise _GIVE_UP
            data = value
            n = len(data)
        else:
            data = as_record_set(value).raw
            n = len(data)
        _put_length(out, n, compact, 2 if kind == K_STRING else 4)
        if n:
            _put_text(out, data)
    elif kind == K_INT16:
        _put_h(_grow(out, 2), 0, <short>_int(value, -32768, 32767))
    elif kind == K_INT64:
        if not PyLong_Check(value):
            raise _GIVE_UP
        try:
            _put_q(_grow(out, 8), 0, <long long>value)
        except OverflowError:
            raise _GIVE_UP
    elif kind == K_BOOL:
        _put_b(_grow(out, 1), 0, 1 if value else 0)
    elif kind == K_INT8:
        _put_b(_grow(out, 1), 0, <signed char>_int(value, -128, 127))
    elif kind == K_UUID:
        if type(value) is not UUID:
            raise _GIVE_UP
        _put_bytes(out, value.bytes)
    elif kind == K_UINT16:
        _put_H(_grow(out, 2), 0, <unsigned short>_int(value, 0, 65535))
    elif kind == K_FLOAT64:
        if not (PyFloat_Check(value) or PyLong_Check(value)):
            raise _GIVE_UP
        try:
            d = value
        except OverflowError:
            raise _GIVE_UP
        _put_d(_grow(out, 8), 0, d)
    elif kind == K_STRUCT:
        if nullable:
            if value is None:
                _put_b(_grow(out, 1), 0, -1)
                return 0
            _put_b(_grow(out, 1), 0, 1)
        _enc_struct(sub, value, out)
    else:
        raise _GIVE_UP
    return 0


cdef int _enc_field(_Field f, bint compact, object value, bytearray out) except -1:
    if not f.is_array:
        return _enc_value(f.kind, f.sub, f.nullable, compact, value, out)
    if value is None:
        if not f.nullable:
            raise _GIVE_UP
        return _put_length(out, -1, compact, 4)
    if type(value) is not list:
        raise _GIVE_UP
    _put_length(out, len(<list>value), compact, 4)
    for item in <list>value:
        _enc_value(f.kind, f.sub, False, compact, item, out)
    return 0


cdef bint _is_default(_Field f, object value) except -1:
    if f.dkind == D_LIST:
        return type(value) is list and not value
    if f.dkind == D_STRUCT:
        return value == f.dvalue()
    if f.dvalue is None:
        return value is None
    return not (value != f.dvalue)


cdef int _enc_struct(_Layout lay, object obj, bytearray out) except -1:
    cdef _Field f
    cdef bytearray t
    if type(obj) is not lay.cls:
        raise _GIVE_UP
    for f in lay.absent:
        if not _is_default(f, getattr(obj, f.attr)):
            raise _GIVE_UP  # an error unless the field is ignorable: the pure codec knows which
    for f in lay.fields:
        _enc_field(f, lay.flexible, getattr(obj, f.attr), out)
    if not lay.flexible:
        return 0
    known = []
    for f in lay.tagged:
        value = getattr(obj, f.attr)
        if not _is_default(f, value):
            t = bytearray()
            _enc_field(f, True, value, t)
            known.append((f.tag, t))
    unknown = obj.unknown_tagged_fields
    if known or unknown:
        try:
            put_tag_section(out, known, unknown, lay.name)
        except Exception:
            raise _GIVE_UP
    else:
        _grow(out, 1)[0] = 0
    return 0


# ---- the entries bound into the classes


cdef class Decoder:
    """``decoder(buf, cursor, end)`` of one message class and version, as ``Message._DECODERS`` holds."""

    cdef readonly object cls, pure
    cdef readonly int version
    cdef bint flexible, has_unknown
    cdef _Layout lay

    def __init__(self, cls, int version, pure, bint flexible, bint has_unknown):
        self.cls, self.version, self.pure, self.flexible, self.has_unknown = cls, version, pure, flexible, has_unknown

    def fast(self, bytes buf, Py_ssize_t pos, Py_ssize_t end):
        """``(object, end position)`` by the interpreter alone; :class:`GiveUp` where it defers."""
        if self.lay is None:
            self.lay = _layout(self.cls, self.version, self.flexible, self.has_unknown)
        if not 0 <= pos <= end <= len(buf):
            raise _GIVE_UP
        try:
            obj = _dec_struct(self.lay, buf, &pos, end)
        except GiveUp:
            raise
        except Exception as exc:
            raise GiveUp(repr(exc)) from exc
        return obj, pos

    def __call__(self, buf, cur, Py_ssize_t end):
        cdef Py_ssize_t start = cur.pos
        cdef Py_ssize_t pos = start
        if self.lay is None:
            self.lay = _layout(self.cls, self.version, self.flexible, self.has_unknown)
        if type(buf) is bytes and 0 <= pos <= end <= len(<bytes>buf):
            try:
                obj = _dec_struct(self.lay, <bytes>buf, &pos, end)
            except Exception:
                pass
            else:
                cur.pos = pos
                return obj
        cur.pos = start
        return self.pure(buf, cur, end)


cdef class Encoder:
    """``encoder(obj, out)`` of one message class and version, as ``Message._ENCODERS`` holds."""

    cdef readonly object cls, pure
    cdef readonly int version
    cdef bint flexible, has_unknown
    cdef _Layout lay

    def __init__(self, cls, int version, pure, bint flexible, bint has_unknown):
        self.cls, self.version, self.pure, self.flexible, self.has_unknown = cls, version, pure, flexible, has_unknown

    def fast(self, obj):
        """The bytes of ``obj`` by the interpreter alone; :class:`GiveUp` where it defers."""
        if self.lay is None:
            self.lay = _layout(self.cls, self.version, self.flexible, self.has_unknown)
        out = bytearray()
        try:
            _enc_struct(self.lay, obj, out)
        except GiveUp:
            raise
        except Exception as exc:
            raise GiveUp(repr(exc)) from exc
        return bytes(out)

    def __call__(self, obj, out):
        cdef Py_ssize_t start
        if self.lay is None:
            self.lay = _layout(self.cls, self.version, self.flexible, self.has_unknown)
        if type(out) is bytearray:
            start = len(<bytearray>out)
            try:
                _enc_struct(self.lay, obj, <bytearray>out)
                return None
            except Exception:
                del out[start:]
        return self.pure(obj, out)


def bind(cls, table):
    """Route ``cls``'s codecs through the interpreter, its pure codecs kept to judge what it refuses;
    ``table(cls, version, flexible, has_unknown)`` gives the field tables (:mod:`kproto.field_tables`)."""
    global _table
    _table = table
    flexible_versions = cls.FLEXIBLE_VERSIONS
    has_unknown = flexible_versions is not None

    def flexible(version):
        return has_unknown and flexible_versions[0] <= version <= flexible_versions[1]

    cls._DECODERS = {v: Decoder(cls, v, fn, flexible(v), has_unknown) for v, fn in cls._DECODERS.items()}
    cls._ENCODERS = {v: Encoder(cls, v, fn, flexible(v), has_unknown) for v, fn in cls._ENCODERS.items()}
