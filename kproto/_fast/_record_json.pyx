# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled JSON text of decoded records: the twin of the record text of :mod:`kproto.cli.json_values`.

Why it exists: ``kproto pcap --format jsonl -v`` writes every record of a capture as a JSON object, and
in pure Python each record costs nine attribute reads, two ``binascii.b2a_base64`` calls and a bytes
``%`` format -- about 2.5 us, several times the cost of decoding the record.  Here the same text is
written into one growing C buffer: integers by a short loop, key and value by a table base64 encoder,
the constant parts copied; a record costs what reading its attributes costs.

The contract (held by the differential test in ``tests/cli/test_cli_record_json.py``): for the same
iterator of decoded messages (:func:`message_list_json`, magic 0/1 ``LegacyRecord`` objects) or records
(:func:`record_list_json`, ``Record`` objects of any magic, with headers), the result is byte for byte
what :func:`kproto.cli.json_values.message_list_text` / ``record_list_text`` return: the compact JSON
objects of the next ``count`` items, separated by commas, ASCII.  Both consume exactly ``count`` items
(fewer if the iterator ends).  An unknown codec name raises ``KeyError``, as the pure twin does.

This module imports nothing from kproto: it only reads the public attributes of the objects it is given.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from json.encoder import encode_basestring_ascii

cdef const char* B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# The two characters of every 12-bit group: three input bytes become two 2-byte copies.
cdef char B64_PAIRS[8192]


cdef void build_pairs() noexcept:
    cdef int i
    for i in range(4096):
        B64_PAIRS[2 * i] = B64[i >> 6]
        B64_PAIRS[2 * i + 1] = B64[i & 63]


build_pairs()

#: The JSON text of each codec name a decoded item can carry.
_CODEC_TEXT = {None: b"none", "gzip": b"gzip", "snappy": b"snappy", "lz4": b"lz4", "zstd": b"zstd"}

#: Header keys repeat from record to record: their JSON text is kept, up to a bound (hostile input).
_HEADER_KEYS = {}
_MAX_HEADER_KEYS = 4096

# The constant pieces of a record's text, in order.
cdef bytes OFFSET = b'{"offset":'
cdef bytes MAGIC = b',"magic":'
cdef bytes ATTRIBUTES = b',"attributes":'
cdef bytes CODEC = b',"codec":"'
cdef bytes TIMESTAMP = b'","timestamp":'
cdef bytes TIMESTAMP_TYPE = b',"timestamp_type":'
cdef bytes CRC = b',"crc":'
cdef bytes NULL_CRC = b',"crc":null'
cdef bytes KEY = b',"key":'
cdef bytes VALUE = b',"value":'
cdef bytes HEADERS = b',"headers":['
cdef bytes HEADER_VALUE = b',"value":'
cdef bytes NULL_TEXT = b"null"
cdef bytes BYTES_OPEN = b'{"$bytes":"'
cdef bytes BYTES_CLOSE = b'"}'

# Upper bound of a record's text besides its key, value and headers: the constant pieces (~140
# bytes) and six integers of at most 20 characters each.
cdef Py_ssize_t FIXED_BOUND = 512


cdef struct Out:
    char* data
    Py_ssize_t size
    Py_ssize_t cap


# One buffer serves every call: a fresh one per call cost more in page faults (its pages are new to the
# process each time) than writing the text did.  A call made while it is in use (an attribute of a
# hand-made item calling back in) gets a buffer of its own.  Kept up to SCRATCH_KEEP bytes.
cdef Out scratch = Out(NULL, 0, 0)
cdef bint scratch_busy = False
cdef Py_ssize_t SCRATCH_KEEP = 8 << 20


cdef Out* take_buffer(Out* own) noexcept:
    global scratch_busy
    if scratch_busy:
        own.data, own.size, own.cap = NULL, 0, 0
        return own
    scratch_busy = True
    scratch.size = 0
    return &scratch


cdef void give_back(Out* out) noexcept:
    global scratch_busy
    if out is not &scratch:
        free(out.data)
        return
    scratch_busy = False
    if scratch.cap > SCRATCH_KEEP:
        free(scratch.data)
        scratch.data, scratch.size, scratch.cap = NULL, 0, 0


cdef int reserve(Out* out, Py_ssize_t extra) except -1:
    """Make room for ``extra`` more bytes (the writers below do not check: every caller reserves first)."""
    cdef Py_ssize_t need = out.size + extra
    cdef Py_ssize_t cap = out.cap if out.cap else 65536
    cdef char* grown
    if need <= out.cap:
        return 0
    while cap < need:
        cap *= 2
    grown = <char*>realloc(out.data, cap)
    if grown == NULL:
        raise MemoryError()
    out.data = grown
    out.cap = cap
    return 0


cdef inline void put(Out* out, bytes text) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text)
    memcpy(out.data + out.size, PyBytes_AS_STRING(text), n)
    out.size += n


cdef inline void put_int(Out* out, int64_t value) noexcept:
    cdef char digits[24]
    cdef int at = 24
    cdef uint64_t rest = <uint64_t>(-(value + 1)) + 1 if value < 0 else <uint64_t>value
    while True:
        at -= 1
        digits[at] = <char>(48 + rest % 10)
        rest //= 10
        if rest == 0:
            break
    if value < 0:
        at -= 1
        digits[at] = b"-"
    memcpy(out.data + out.size, digits + at, 24 - at)
    out.size += 24 - at


cdef inline Py_ssize_t base64_size(Py_ssize_t n) noexcept:
    return (n + 2) // 3 * 4


cdef void put_base64(Out* out, const uint8_t* p, Py_ssize_t n) noexcept:
    cdef char* w = out.data + out.size
    cdef Py_ssize_t i = 0
    cdef unsigned int v
    while i + 3 <= n:
        v = (<unsigned int>p[i] << 16) | (<unsigned int>p[i + 1] << 8) | p[i + 2]
        memcpy(w, B64_PAIRS + 2 * (v >> 12), 2)
        memcpy(w + 2, B64_PAIRS + 2 * (v & 0xFFF), 2)
        w += 4
        i += 3
    if n - i == 1:
        v = <unsigned int>p[i] << 16
        w[0] = B64[v >> 18]
        w[1] = B64[(v >> 12) & 63]
        w[2] = b"="
        w[3] = b"="
        w += 4
    elif n - i == 2:
        v = (<unsigned int>p[i] << 16) | (<unsigned int>p[i + 1] << 8)
        w[0] = B64[v >> 18]
        w[1] = B64[(v >> 12) & 63]
        w[2] = B64[(v >> 6) & 63]
        w[3] = b"="
        w += 4
    out.size = w - out.data


cdef inline Py_ssize_t bytes_bound(object data) noexcept:
    """Room for ``data`` as ``{"$bytes": ...}`` or ``null`` (``data`` is bytes or None)."""
    return 4 if data is None else base64_size(PyBytes_GET_SIZE(data)) + 14


cdef inline void put_bytes(Out* out, object data) noexcept:
    """``data`` (bytes or None) as ``{"$bytes":"<base64>"}`` or ``null``; room reserved by the caller."""
    if data is None:
        put(out, NULL_TEXT)
        return
    put(out, BYTES_OPEN)
    put_base64(out, <const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    put(out, BYTES_CLOSE)


cdef inline object exact_bytes(object data):
    """Keys and values are bytes from the decoders; anything bytes-like given by hand is copied to bytes."""
    if data is None or type(data) is bytes:
        return data
    return bytes(data)


cdef int put_common(Out* out, object item, object key, object value) except -1:
    """Everything up to and including ``"timestamp_type":...`` (after reserving room for the whole record)."""
    cdef bytes codec = _CODEC_TEXT[item.codec]
    cdef object timestamp = item.timestamp
    cdef object timestamp_type = item.timestamp_type
    reserve(out, FIXED_BOUND + PyBytes_GET_SIZE(codec) + bytes_bound(key) + bytes_bound(value))
    put(out, OFFSET)
    put_int(out, item.offset)
    put(out, MAGIC)
    put_int(out, item.magic)
    put(out, ATTRIBUTES)
    put_int(out, item.attributes)
    put(out, CODEC)
    put(out, codec)
    put(out, TIMESTAMP)
    if timestamp is None:
        put(out, NULL_TEXT)
    else:
        put_int(out, timestamp)
    put(out, TIMESTAMP_TYPE)
    if timestamp_type is None:
        put(out, NULL_TEXT)
    else:
        put_int(out, timestamp_type)
    return 0


cdef int put_head(Out* out, object item, bint first, bint with_crc) except -1:
    """A record's opening, shared by both writers: the comma before every record but the first, then
    everything up to and including ``"value":...`` (``"crc"`` is the message's for magic 0/1, null for
    records of any magic)."""
    cdef object key = exact_bytes(item.key)
    cdef object value = exact_bytes(item.value)
    if not first:
        reserve(out, 1)
        out.data[out.size] = b","
        out.size += 1
    put_common(out, item, key, value)
    if with_crc:
        put(out, CRC)
        put_int(out, item.crc)
    else:
        put(out, NULL_CRC)
    put(out, KEY)
    put_bytes(out, key)
    put(out, VALUE)
    put_bytes(out, value)
    return 0


cdef bytes header_key_text(str key):
    cdef bytes text = _HEADER_KEYS.get(key)
    if text is None:
        text = b'{"key":' + encode_basestring_ascii(key).encode("ascii")
        if len(_HEADER_KEYS) < _MAX_HEADER_KEYS:
            _HEADER_KEYS[key] = text
    return text


cdef bytes finish(Out* out):
    return PyBytes_FromStringAndSize(out.data, out.size)


def message_list_json(messages, Py_ssize_t count):
    """The next ``count`` magic 0/1 messages of the iterator ``messages`` as compact JSON objects,
    comma-separated (ASCII bytes; see the module docs)."""
    cdef Out own
    cdef Out* out
    cdef Py_ssize_t done = 0
    if count <= 0:
        return b""
    out = take_buffer(&own)
    try:
        for item in messages:
            put_head(out, item, done == 0, True)
            out.data[out.size] = b"}"
            out.size += 1
            done += 1
            if done == count:
                break
        return finish(out)
    finally:
        give_back(out)


def record_list_json(records, Py_ssize_t count):
    """The next ``count`` records (any magic, with ``headers``) of the iterator ``records`` as compact JSON
    objects, comma-separated (ASCII bytes; see the module docs)."""
    cdef Out own
    cdef Out* out
    cdef Py_ssize_t done = 0, n, i
    cdef object header_value
    cdef tuple headers
    cdef bytes key_text
    if count <= 0:
        return b""
    out = take_buffer(&own)
    try:
        for item in records:
            headers = tuple(item.headers)
            put_head(out, item, done == 0, False)
            put(out, HEADERS)
            n = len(headers)
            for i in range(n):
                header_key, header_value = headers[i]
                key_text = header_key_text(header_key)
                header_value = exact_bytes(header_value)
                reserve(out, PyBytes_GET_SIZE(key_text) + bytes_bound(header_value) + 16)
                if i:
                    out.data[out.size] = b","
                    out.size += 1
                put(out, key_text)
                put(out, HEADER_VALUE)
                put_bytes(out, header_value)
                out.data[out.size] = b"}"
                out.size += 1
            reserve(out, 2)
            out.data[out.size] = b"]"
            out.data[out.size + 1] = b"}"
            out.size += 2
            done += 1
            if done == count:
                break
        return finish(out)
    finally:
        give_back(out)


def base64_json(data):
    """``data`` (bytes) as a JSON string of its base64, quotes included (ASCII bytes)."""
    cdef Out own
    cdef Out* out
    if data is None:
        raise TypeError("base64_json takes bytes, not None")
    data = exact_bytes(data)
    out = take_buffer(&own)
    try:
        reserve(out, base64_size(PyBytes_GET_SIZE(data)) + 2)
        out.data[0] = b'"'
        out.size = 1
        put_base64(out, <const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        out.data[out.size] = b'"'
        out.size += 1
        return finish(out)
    finally:
        give_back(out)
