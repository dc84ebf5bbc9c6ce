# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled message sets (magic 0 and 1): the twin of :mod:`kproto.records.legacy_records`.

Same names, same results, same error class and offset for the same input.  ``decode`` validates the whole
set in one pass over the buffer (every length checked against the bytes left before it is used, integers
loaded byte by byte, no unaligned casts, CRC32 on the pointer) and returns a lazy sequence that builds each
:class:`LegacyRecord` when iteration reaches it, so a consumer's loop reuses the memory of the previous message.
``decode_columns`` writes C column buffers (:mod:`kproto._fast._columns`) with no per-message objects.
Per-wrapper work (decompression) goes through the shared Python codecs in :mod:`kproto.records.compression`.
:mod:`kproto._fast._default_records` (magic 2) cimports what it shares from here (``_legacy_records.pxd``).

Within the records layer this core sits above the modules it calls -- the codecs of
:mod:`kproto.records.compression` and the result classes of :mod:`kproto.records.decoded`, which import
nothing of the core -- and below :mod:`kproto._backend` and the public API of :mod:`kproto.records.codec`.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.ref cimport Py_XDECREF
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.compression import decompress_buffer
from kproto.records.decoded import MessageSet

from kproto._fast._bytes cimport (I32_MAX, NO_TIMESTAMP, BytesOut, binary_data, load_i32, load_i64, load_u32,
                                  out_finish, out_reserve, store_i64, store_u32)
from kproto._fast._checksums cimport crc_of
from kproto._fast._columns cimport _Columns

__all__ = ["LegacyRecord", "decode", "decode_columns", "encode_plain"]

cdef dict CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4"}
cdef dict CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
cdef tuple CODEC_NAME_BY_ID = (None, "gzip", "snappy", "lz4", "zstd", None, None, None)


# --- plain slots for the attributes every consumer reads -----------------------------------------------------
#
# Cython exposes a ``cdef readonly object`` attribute through a getter function (a getset descriptor).
# CPython's specializing interpreter (3.11+) cannot inline those: every ``record.value`` in a consumer's
# loop goes the generic way (type lookup, descriptor call), about as much time per read as building the
# record.  A member descriptor of type T_OBJECT_EX (what ``__slots__`` makes) is read inline
# (LOAD_ATTR_SLOT).  So, once at import, the object fields read on every record (offset, key, value,
# headers) are re-exposed as read-only member descriptors over the same struct fields: same names, same
# values, still read-only; only the lookup is cheaper.  Cython does not tell where a field sits in the
# object, so a probe instance whose field holds a marker object is searched for that pointer.
cdef extern from *:
    """
    #include <structmember.h>
    static int kproto_member_slot(PyObject *type, const char *name, Py_ssize_t offset, const char *doc) {
        /* The definition must outlive the type (the descriptor points to it): allocated once, never freed. */
        PyMemberDef *def = (PyMemberDef *)PyMem_Calloc(1, sizeof(PyMemberDef));
        PyObject *descr;
        int rc;
        if (def == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        def->name = name;
        def->type = T_OBJECT_EX;
        def->offset = offset;
        def->flags = READONLY;
        def->doc = doc;
        descr = PyDescr_NewMember((PyTypeObject *)type, def);
        if (descr == NULL)
            return -1;
        rc = PyDict_SetItemString(((PyTypeObject *)type)->tp_dict, name, descr);
        Py_DECREF(descr);
        PyType_Modified((PyTypeObject *)type);
        return rc;
    }
    static Py_ssize_t kproto_field_offset(PyObject *probe, PyObject *marker) {
        /* Where in probe's struct the object field now holding marker lives; -1 if none does. */
        Py_ssize_t at;
        for (at = sizeof(PyObject); at + (Py_ssize_t)sizeof(PyObject *) <= Py_TYPE(probe)->tp_basicsize;
             at += sizeof(PyObject *)) {
            if (*(PyObject **)((char *)probe + at) == marker)
                return at;
        }
        return -1;
    }
    """
    int kproto_member_slot(object type, const char* name, Py_ssize_t offset, const char* doc) except -1
    Py_ssize_t kproto_field_offset(object probe, object marker)


cdef int expose_slot(type cls, object probe, object marker, const char* name, const char* doc) except -1:
    """Re-expose the object field of ``cls`` that ``probe`` has set to ``marker`` as the slot ``name``."""
    cdef Py_ssize_t at = kproto_field_offset(probe, marker)
    if at < 0:
        raise SystemError(f"{cls.__name__}.{name.decode()}: field not found in the object struct")
    return kproto_member_slot(cls, name, at, doc)


@cython.final
@cython.freelist(512)
@cython.no_gc
cdef class LegacyRecord:
    """One decoded message (the compiled twin of :class:`kproto.records.legacy_records.LegacyRecord`).

    ``key``/``value``: ``bytes`` or ``None`` (null and empty stay distinct); ``timestamp``: int for magic 1,
    ``None`` for magic 0; ``offset``: absolute; ``magic``; ``attributes``: the message's own attribute byte;
    ``codec``: the name of the codec it travelled with (the wrapper's, for messages expanded from a compressed
    wrapper: ``"gzip"``, ``"snappy"``, ``"lz4"``; ``None`` uncompressed), as encoding takes it;
    ``timestamp_type``: 0 CreateTime / 1 LogAppendTime for magic 1, ``None`` for magic 0; ``crc``: as stored.
    """

    # Only bytes/int/None are ever stored, so instances cannot form cycles: no_gc keeps them out of the
    # collector, which would otherwise rescan every message of a large fetch.
    # Fields read by nearly every consumer are stored as Python objects (one incref on access); the rest
    # stay C values and become objects only when asked for, which keeps the decode loop short.

    @property
    def timestamp(self):
        """The timestamp (ms) for magic 1, None for magic 0."""
        return None if self._timestamp_type < 0 else self._timestamp

    @property
    def timestamp_type(self):
        """0 CreateTime / 1 LogAppendTime for magic 1, None for magic 0."""
        return None if self._timestamp_type < 0 else self._timestamp_type

    @property
    def codec(self):
        """The codec name it travelled with (``"gzip"``, ``"snappy"``, ``"lz4"``) or None, as encoding takes it."""
        return CODEC_NAME_BY_ID[self._codec]

    def __init__(self, key=None, value=None, timestamp=None, offset=0, magic=0, attributes=0, codec=None,
                 timestamp_type=None, crc=0):
        if key is not None and type(key) is not bytes:
            raise TypeError("key must be bytes or None")
        if value is not None and type(value) is not bytes:
            raise TypeError("value must be bytes or None")
        if (timestamp is None) != (timestamp_type is None):
            raise TypeError("timestamp and timestamp_type are both set (magic 1) or both None (magic 0)")
        self.key = key
        self.value = value
        self.offset = int(offset)
        self._timestamp = 0 if timestamp is None else timestamp
        self._timestamp_type = -1 if timestamp_type is None else timestamp_type
        self.magic = magic
        self.attributes = attributes
        self._codec = CODEC_IDS[codec]
        self.crc = crc

    def _astuple(self):
        return (self.key, self.value, self.timestamp, self.offset, self.magic, self.attributes, self.codec,
                self.timestamp_type, self.crc)

    def __eq__(self, other):
        if type(other) is not LegacyRecord:
            return NotImplemented
        return self._astuple() == (<LegacyRecord>other)._astuple()

    def __hash__(self):
        return hash(self._astuple())

    def __repr__(self):
        return (f"LegacyRecord(offset={self.offset!r}, key={self.key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp!r}, magic={self.magic}, codec={self.codec!r})")


cdef int expose_message_slots() except -1:
    cdef LegacyRecord probe = LegacyRecord.__new__(LegacyRecord)
    markers = (object(), object(), object())
    probe.key, probe.value, probe.offset = markers
    expose_slot(LegacyRecord, probe, markers[0], b"key", b"The key: bytes, or None for a null key.")
    expose_slot(LegacyRecord, probe, markers[1], b"value", b"The value: bytes, or None for a null value.")
    expose_slot(LegacyRecord, probe, markers[2], b"offset", b"The absolute offset.")
    return 0


expose_message_slots()


cdef inline LegacyRecord new_message(object key, object value, int64_t timestamp, int64_t offset, int magic,
                                int attributes, int codec, int timestamp_type, uint32_t crc):
    cdef LegacyRecord m = LegacyRecord.__new__(LegacyRecord)
    m.key = key
    m.value = value
    m.offset = offset
    m._timestamp = timestamp
    m.magic = magic
    m.attributes = attributes
    m._codec = codec
    m._timestamp_type = timestamp_type
    m.crc = crc
    return m


cdef Py_ssize_t decode_set(const uint8_t* buf, Py_ssize_t n, list out, _Columns cols, Decoding* opts,
                           bint inner, int carrier_codec, bint* partial, int64_t* last_offset) except -1:
    """Decode ``buf`` into ``out`` (objects) or ``cols`` (columns); return the valid byte count."""
    cdef Py_ssize_t pos = 0, start, end, p, left
    cdef int64_t offset, timestamp
    cdef int32_t size, klen, vlen
    cdef uint32_t crc
    cdef int magic, attributes, codec
    cdef bint crc_ok
    cdef Py_ssize_t key_at
    cdef object key, value
    partial[0] = False
    while pos < n:
        left = n - pos
        if left < 12:
            partial[0] = True
            return pos
        size = load_i32(buf + pos + 8)
        if size < MIN_SIZE:
            raise DecodeError(f"message size {size} is below the minimum of {MIN_SIZE}", pos + 8)
        if left < 18 or size > left - 12:
            partial[0] = True
            return pos
        offset = load_i64(buf + pos)
        start = pos + 12
        end = start + size
        crc = load_u32(buf + start)
        magic = <int8_t>buf[start + 4]
        attributes = <int8_t>buf[start + 5]
        crc_ok = True
        if (opts.check_crc and (opts.check_inner_crc or not inner)) or opts.flag_crc:
            crc_ok = crc_of(buf + start + 4, size - 4) == crc
            if not crc_ok and opts.check_crc:
                raise DecodeError(
                    f"CRC mismatch: stored 0x{crc:08x}, computed 0x{crc_of(buf + start + 4, size - 4):08x}", start)
        if magic == 0:
            timestamp = NO_TIMESTAMP
            p = start + 6
        elif magic == 1:
            if size < MIN_SIZE_V1:
                raise DecodeError(f"message size {size} is below the magic 1 minimum of {MIN_SIZE_V1}", pos + 8)
            timestamp = load_i64(buf + start + 6)
            p = start + 14
        else:
            raise DecodeError(f"unsupported message magic {magic}", start + 4)
        klen = load_i32(buf + p)
        p += 4
        if klen < -1 or klen > end - p - 4:
            raise DecodeError(f"key length {klen} does not fit the {end - p - 4} bytes left in the message", p - 4)
        key_at = p
        if klen > 0:
            p += klen
        vlen = load_i32(buf + p)
        p += 4
        if not (vlen == -1 and p == end) and vlen != end - p:
            raise DecodeError(f"value length {vlen} does not match the {end - p} bytes left in the message", p - 4)
        codec = attributes & CODEC_MASK
        if inner:
            opts.inner_magics |= 1 << magic
            if offset > opts.inner_max_offset:
                opts.inner_max_offset = offset
        if codec:
            expand_wrapper(buf, out, cols, opts, inner, pos, p, offset, magic, attributes, timestamp, vlen, crc_ok)
        elif opts.lazy:
            opts.count += 1
            last_offset[0] = offset
        elif cols is not None:
            cols.add_row(offset, timestamp, magic, attributes, carrier_codec, crc_ok, buf + key_at, klen, buf + p, vlen)
            last_offset[0] = offset
        else:
            key = None if klen == -1 else PyBytes_FromStringAndSize(<char*>buf + key_at, klen)
            value = None if vlen == -1 else PyBytes_FromStringAndSize(<char*>buf + p, vlen)
            out.append(new_message(key, value, timestamp, offset, magic, attributes & 0xFF, carrier_codec,
                                   -1 if magic == 0 else (attributes >> 3) & 1, crc))
            last_offset[0] = offset
        pos = end
    return pos


cdef int expand_wrapper(const uint8_t* buf, list out, _Columns cols, Decoding* opts, bint inner, Py_ssize_t entry,
                        Py_ssize_t value_pos, int64_t offset, int magic, int attributes, int64_t timestamp,
                        int32_t vlen, bint crc_ok) except -1:
    """Decompress a wrapper's inner set and add its messages with absolute offsets."""
    cdef int codec = attributes & CODEC_MASK
    cdef Py_ssize_t row0 = 0, valid, i
    cdef bint partial
    cdef int64_t last = 0, delta
    cdef list found = None
    cdef bint log_append
    cdef object raw
    cdef const uint8_t* raw_data
    cdef Py_ssize_t raw_size
    cdef LegacyRecord m
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise DecodeError(f"unknown compression codec {codec}", entry + 17)
    if inner:
        raise LimitExceededError("a compressed message inside a compressed message set (nested compression)", entry + 17)
    if vlen == -1:
        raise DecodeError(f"{name} wrapper message has a null value", value_pos - 4)
    payload = PyBytes_FromStringAndSize(<char*>buf + value_pos, vlen)
    # bytes, or the bytearray the codec decompressed into (never resized or exposed afterwards)
    raw = decompress_buffer(codec, payload, magic=magic, limit=opts.limit, position=value_pos,
                            allocate=_unfilled_bytearray)
    if type(raw) is bytes:
        raw_data = <const uint8_t*>PyBytes_AS_STRING(raw)
        raw_size = PyBytes_GET_SIZE(raw)
    else:
        raw_data = <const uint8_t*>PyByteArray_AS_STRING(raw)
        raw_size = PyByteArray_GET_SIZE(raw)
    opts.limit -= raw_size  # what the next wrappers of this call may still decompress
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN
    if cols is not None:
        cols.reserve_exact(0, raw_size)
        row0 = cols.count
    elif not opts.lazy:
        found = []
    row0 = opts.count if opts.lazy else row0
    try:
        valid = decode_set(raw_data, raw_size, found, cols, opts, True, codec, &partial, &last)
    except DecodeError as exc:
        raise type(exc)(f"{exc.reason} [decompressed byte {exc.offset} of the {name} wrapper]", value_pos) from None
    if partial:
        raise DecodeError(f"the {name} wrapper's inner message set is truncated at decompressed byte {valid}", value_pos)
    if (cols is not None and cols.count == row0) or (opts.lazy and opts.count == row0) or (found is not None and not found):
        raise DecodeError(f"the {name} wrapper holds no messages", value_pos)
    if opts.inner_magics & ~(1 << magic):
        raise DecodeError(f"the {name} wrapper (magic {magic}) holds messages of another magic", value_pos)
    delta = 0
    if magic == 1 and offset != 0:  # offset 0: older librdkafka left it unset, inner offsets are used as they are
        if offset < last:
            raise DecodeError(f"wrapper offset {offset} is below its last inner offset {last}", entry)
        if last < 0 and offset > INT64_MAX + last:
            raise DecodeError(f"wrapper offset {offset} minus last inner offset {last} does not fit int64", entry)
        delta = offset - last
        if opts.inner_max_offset > INT64_MAX - delta:
            raise DecodeError(f"inner offsets of the wrapper at offset {offset} do not fit int64 once made absolute",
                              entry)
    log_append = magic == 1 and (attributes & TS_TYPE_BIT)
    if opts.lazy:
        out.append(_InnerSet.new(raw, raw_data, raw_size, codec, delta, log_append, timestamp))
    elif cols is None:
        if delta or log_append:
            for item in found:
                m = <LegacyRecord>item
                m.offset = m.offset + delta
                if log_append:
                    m._timestamp = timestamp
                    m._timestamp_type = 1
        out.extend(found)
    else:
        fix_rows(cols, row0, delta, log_append, timestamp, crc_ok)
    return 0


cdef void fix_rows(_Columns cols, Py_ssize_t row0, int64_t delta, bint log_append, int64_t timestamp,
                   bint crc_ok) noexcept:
    cdef Py_ssize_t i
    for i in range(row0, cols.count):
        if delta:
            cols.offsets[i] += delta
        if log_append:
            cols.timestamps[i] = timestamp
        if not crc_ok:
            cols.crc_ok[i] = 0


def _unfilled_bytearray(Py_ssize_t size):
    """A bytearray of ``size`` bytes left as allocated (not zeroed): the ``allocate`` of
    :func:`kproto.records.compression.decompress_buffer`, whose one-copy paths keep a buffer only once the codec
    has written every byte of it."""
    return PyByteArray_FromStringAndSize(NULL, size)


cdef class _BufferView:
    """Holds a Py_buffer for the duration of a decode."""

    def __cinit__(self, data):
        PyObject_GetBuffer(data, &self.view, PyBUF_SIMPLE)
        self.held = True

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef bytes as_bytes(self):
        return PyBytes_FromStringAndSize(<char*>self.view.buf, self.view.len)


@cython.final
cdef class _InnerSet:
    """A decompressed, already validated inner message set and how its messages are adjusted."""

    cdef object raw  # bytes or bytearray, owned here and never resized: data stays valid
    cdef const uint8_t* data
    cdef Py_ssize_t size
    cdef int codec
    cdef int64_t delta
    cdef bint log_append
    cdef int64_t timestamp

    @staticmethod
    cdef _InnerSet new(object raw, const uint8_t* data, Py_ssize_t size, int codec, int64_t delta, bint log_append,
                       int64_t timestamp):
        cdef _InnerSet s = _InnerSet.__new__(_InnerSet)
        s.raw = raw
        s.data = data
        s.size = size
        s.codec = codec
        s.delta = delta
        s.log_append = log_append
        s.timestamp = timestamp
        return s


cdef inline LegacyRecord message_at(const uint8_t* buf, Py_ssize_t pos, int carrier_codec, int64_t delta):
    """Build the message at ``pos`` of a buffer that decode_set has validated (so no checks here), its offset
    moved by ``delta`` (which decode_set has checked to fit)."""
    cdef Py_ssize_t start = pos + 12, p
    cdef int32_t klen, vlen
    cdef int magic = <int8_t>buf[start + 4]
    cdef int attributes = <int8_t>buf[start + 5]
    cdef int64_t timestamp = NO_TIMESTAMP
    p = start + 6
    if magic == 1:
        timestamp = load_i64(buf + p)
        p += 8
    klen = load_i32(buf + p)
    p += 4
    key = None if klen == -1 else PyBytes_FromStringAndSize(<char*>buf + p, klen)
    if klen > 0:
        p += klen
    vlen = load_i32(buf + p)
    p += 4
    value = None if vlen == -1 else PyBytes_FromStringAndSize(<char*>buf + p, vlen)
    return new_message(key, value, timestamp, load_i64(buf + pos) + delta, magic, attributes & 0xFF, carrier_codec,
                       -1 if magic == 0 else (attributes >> 3) & 1, load_u32(buf + start))


@cython.final
cdef class _MessageIterator:
    """Walks a validated message set, building each LegacyRecord only when it is reached."""

    cdef bytes top
    cdef Py_ssize_t pos, end
    cdef list inner_sets
    cdef Py_ssize_t next_inner
    cdef _InnerSet current
    cdef Py_ssize_t inner_pos

    def __iter__(self):
        return self

    def __next__(self):
        cdef const uint8_t* buf
        cdef LegacyRecord m
        cdef int32_t size
        while True:
            if self.current is not None:
                buf = self.current.data
                if self.inner_pos < self.current.size:
                    m = message_at(buf, self.inner_pos, self.current.codec, self.current.delta)
                    self.inner_pos += 12 + load_i32(buf + self.inner_pos + 8)
                    if self.current.log_append:
                        m._timestamp = self.current.timestamp
                        m._timestamp_type = 1
                    return m
                self.current = None
            if self.pos >= self.end:
                raise StopIteration
            buf = <const uint8_t*>PyBytes_AS_STRING(self.top)
            size = load_i32(buf + self.pos + 8)
            if buf[self.pos + 17] & CODEC_MASK:
                self.current = <_InnerSet>self.inner_sets[self.next_inner]
                self.next_inner += 1
                self.inner_pos = 0
                self.pos += 12 + size
                continue
            m = message_at(buf, self.pos, 0, 0)
            self.pos += 12 + size
            return m


@cython.final
cdef class LazyMessages:
    """The messages of a validated message set, built one at a time on iteration.

    Iterating creates each :class:`LegacyRecord` only when reached, so a consumer that handles messages one by one
    never holds the whole set as objects.  Indexing builds (and keeps) the full list once.
    """

    cdef bytes top
    cdef Py_ssize_t end
    cdef list inner_sets
    cdef Py_ssize_t count
    cdef list built

    def __iter__(self):
        if self.built is not None:
            return iter(self.built)
        cdef _MessageIterator it = _MessageIterator.__new__(_MessageIterator)
        it.top = self.top
        it.end = self.end
        it.inner_sets = self.inner_sets
        return it

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if self.built is None:
            self.built = list(self)
        return self.built[index]

    def __repr__(self):
        return f"LazyMessages({self.count} messages)"


def decode(data, bint check_crc, Py_ssize_t limit, bint check_inner_crc=True):
    """Validate a message set now, build its :class:`LegacyRecord` objects on iteration
    (see :func:`kproto.records.decode_message_set`)."""
    cdef Decoding opts
    cdef bint partial
    cdef int64_t last
    cdef list inner_sets = []
    cdef Py_ssize_t valid
    cdef bytes top = data if type(data) is bytes else (<_BufferView>_BufferView(data)).as_bytes()
    opts.check_crc = check_crc
    opts.check_inner_crc = check_inner_crc
    opts.flag_crc = False
    opts.lazy = True
    opts.count = 0
    opts.limit = limit
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN
    valid = decode_set(<const uint8_t*>PyBytes_AS_STRING(top), PyBytes_GET_SIZE(top), inner_sets, None, &opts,
                       False, 0, &partial, &last)
    cdef LazyMessages messages = LazyMessages.__new__(LazyMessages)
    messages.top = top
    messages.end = valid
    messages.inner_sets = inner_sets
    messages.count = opts.count
    return MessageSet(messages, valid, partial)


def decode_columns(data, bint check_crc, Py_ssize_t limit):
    """Decode a message set into columns (see :func:`kproto.records.decode_columns`)."""
    cdef Decoding opts
    cdef bint partial
    cdef int64_t last
    cdef _Columns cols = _Columns()
    cdef _BufferView held = _BufferView(data)
    opts.check_crc = check_crc
    opts.check_inner_crc = True
    opts.flag_crc = not check_crc
    opts.lazy = False
    opts.count = 0
    opts.limit = limit
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN
    valid = decode_set(<const uint8_t*>held.view.buf, held.view.len, None, cols, &opts, False, 0, &partial, &last)
    return cols.build(valid, partial)


cdef object binary_field(object field, str name, Py_ssize_t index, str noun="message"):
    if field is None or type(field) is bytes:
        return field
    if isinstance(field, (bytes, bytearray, memoryview)):
        return memoryview(field).tobytes()
    raise EncodeError(f"{noun} {index}: {name} must be bytes-like or None, not {type(field).__name__}")


cdef int64_t timestamp_field(object timestamp, Py_ssize_t index, str noun="message") except? -2:
    if timestamp is None:
        return NO_TIMESTAMP
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise EncodeError(f"{noun} {index}: timestamp must be an int or None, not {type(timestamp).__name__}")
    if not (-(2**63) <= timestamp <= 2**63 - 1):
        raise EncodeError(f"{noun} {index}: timestamp {timestamp} does not fit int64")
    return timestamp


def encode_plain(messages, int magic, object base_offset, int attributes):
    """Encode uncompressed messages at offsets ``base_offset``, +1, ...; return (bytes, count, max timestamp)."""
    cdef BytesOut out
    cdef Py_ssize_t index = 0, klen, vlen, size, at
    cdef const char* kptr
    cdef const char* vptr
    cdef int64_t offset = base_offset, timestamp, max_timestamp = NO_TIMESTAMP
    cdef bint offset_overflow = False
    cdef uint8_t* w
    cdef tuple tup
    out.obj = NULL
    out.size = 0
    out.cap = 0
    try:
        for item in messages:
            if type(item) is tuple:
                tup = <tuple>item
                if len(tup) == 2:
                    key = tup[0]
                    value = tup[1]
                    ts = None
                elif len(tup) == 3:
                    key = tup[0]
                    value = tup[1]
                    ts = tup[2]
                else:
                    raise EncodeError(f"message {index}: a tuple must be (key, value) or (key, value, timestamp)")
            else:
                try:
                    key = item.key
                    value = item.value
                except AttributeError:
                    raise EncodeError(
                        f"message {index}: expected a (key, value[, timestamp]) tuple or an object with key and value"
                    ) from None
                ts = getattr(item, "timestamp", None)
            # bytes and bytearray are read in place (nothing runs Python code while they are copied)
            if type(key) is not bytes and key is not None and type(key) is not bytearray:
                key = binary_field(key, "key", index)
            if type(value) is not bytes and value is not None and type(value) is not bytearray:
                value = binary_field(value, "value", index)
            timestamp = timestamp_field(ts, index)
            kptr = binary_data(key, &klen)
            vptr = binary_data(value, &vlen)
            if klen > I32_MAX or vlen > I32_MAX:
                raise EncodeError(f"message {index}: key or value longer than 2 GiB")
            if offset_overflow:
                raise EncodeError(f"message {index}: offset {base_offset + index} does not fit int64")
            size = 14 + (8 if magic == 1 else 0) + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
            if size > I32_MAX:
                raise EncodeError(f"message {index}: larger than 2 GiB")
            w = out_reserve(&out, 12 + size)
            store_i64(w, offset)
            store_u32(w + 8, <uint32_t>size)
            w[16] = <uint8_t>magic
            w[17] = <uint8_t>attributes
            at = 18
            if magic == 1:
                if ts is not None and timestamp > max_timestamp:
                    max_timestamp = timestamp
                store_i64(w + at, timestamp)
                at += 8
            store_u32(w + at, <uint32_t><int32_t>klen)
            at += 4
            if klen > 0:
                memcpy(w + at, kptr, <size_t>klen)
                at += klen
            store_u32(w + at, <uint32_t><int32_t>vlen)
            at += 4
            if vlen > 0:
                memcpy(w + at, vptr, <size_t>vlen)
            store_u32(w + 12, crc_of(w + 16, size - 4))
            out.size += 12 + size
            if offset == 9223372036854775807:
                offset_overflow = True
            else:
                offset += 1
            index += 1
        return out_finish(&out), index, max_timestamp
    finally:
        Py_XDECREF(out.obj)
