# Compiled, the frame encoders write the size and request header in C (the writers the generated codecs
# use) into the buffer kproto.message_base keeps between encodes; the pure build runs framing.py as it is.

from cpython.bytearray cimport PyByteArray_AS_STRING

from kproto._generated._c_wire cimport _grow, _put_h, _put_i, _put_text
from kproto.message_base cimport _buffer_bytes, _take_buffer

# Called only here: C calls (a Python-level call costs about as much as writing the header).
cdef object _request_head(object api_key, object version, object header_version, object correlation_id,
                          object client_id)
cdef bytes _frame(bytearray out)
