"""Frames: the int32 size prefix, the request/response headers, and splitting a byte stream into frames.

A frame is the bytes as they travel: ``size`` (int32, not counting itself), the header, the body.  Offsets
in every :class:`~kproto.errors.DecodeError` raised here are offsets into the frame, size prefix included,
so they point at the byte a hex dump shows.
"""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Pattern, Tuple, Union

try:
    import cython  # compiled: the frame's head is written in C into the kept encode buffer
except ImportError:  # pure Python without Cython installed

    class cython:  # type: ignore[no-redef]
        compiled = False


from kproto._generated.registry import RequestHeader, ResponseHeader
from kproto.apis import APIS, ApiInfo
from kproto.errors import (
    DecodeError,
    EncodeError,
    LengthMismatchError,
    LimitExceededError,
    UnknownVersionError,
    UnsupportedVersionError,
)
from kproto.message_base import Cursor, Message
from kproto.wire import I16, I32, trailing_bytes

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "RequestHeader",
    "ResponseHeader",
    "FrameReader",
    "encode_request",
    "decode_request",
    "decode_request_header",
    "encode_response",
    "decode_response",
    "check_frame",
    "plausible_request_header",
    "MIN_REQUEST_SIZE",
    "ResyncingSplitter",
    "REQUEST_CANDIDATE",
]

#: Largest frame accepted by default: Kafka's ``socket.request.max.bytes`` default (100 MiB).
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

Bytes = Union[bytes, bytearray, memoryview]


def _api_for(api_key: int, version: int, what: str, offset: Optional[int] = None) -> ApiInfo:
    """The API of a frame being decoded; an unknown key or version is an :class:`UnknownVersionError`
    whose offset is where the api key (version: two bytes later) sits when the frame carries them."""
    info = APIS.get(api_key)
    if info is None:
        raise UnknownVersionError(f"unknown api key {api_key} in {what}", offset, "api_key")
    if version not in info.versions:
        raise UnknownVersionError(
            f"{info.name} has no version {version} (kproto knows {info.min_version}-{info.max_version})",
            None if offset is None else offset + 2,
            "api_version",
        )
    return info


def _encodable(msg: Message, version: int, kind: str) -> ApiInfo:
    """The API of a message being encoded; an unknown version is an :class:`UnsupportedVersionError`."""
    if getattr(msg, "KIND", None) != kind:
        raise EncodeError(f"{type(msg).__name__} is not a {kind} message")
    info = APIS.get(msg.API_KEY)  # type: ignore[call-overload]
    if info is None:
        raise UnsupportedVersionError(f"unknown api key {msg.API_KEY}")
    if version not in info.versions:
        raise UnsupportedVersionError(
            f"{info.name} has no version {version} (kproto knows {info.min_version}-{info.max_version})"
        )
    return info


def _frame(out: bytearray) -> bytes:
    """Fill in the size of a frame built after a 4-byte placeholder."""
    size = len(out) - 4
    if size > 0x7FFFFFFF:
        raise EncodeError(f"frame of {size} bytes does not fit an int32 size")
    if cython.compiled:
        _put_i(PyByteArray_AS_STRING(out), 0, size)
        return _buffer_bytes(out)  # out is kept for the next encode (kproto.message_base)
    I32.pack_into(out, 0, size)
    return bytes(out)


# The frame functions' fast path.  What _encodable/_api_for and ApiInfo's header-version methods answer
# through Python-level properties (about a microsecond per frame, a third of a small request's encode)
# is read here from tables built once, per message class (encoding) or api key (decoding); anything
# they do not cover — an unknown key or version, a subclass, a value out of the ordinary — takes the
# general path, which raises the precise error.

#: Request class -> (api key, {version: request header version}) over the versions kproto speaks.
_REQUEST_FRAMING = {
    info.request: (info.api_key, {v: info.request_header_version(v) for v in info.versions}) for info in APIS.values()
}
#: Response class -> (api key, {version: response header version}).
_RESPONSE_FRAMING = {
    info.response: (info.api_key, {v: info.response_header_version(v) for v in info.versions}) for info in APIS.values()
}
#: Api key -> {version: (request header version, its decoder, the request body's decoder, request class)}.
_REQUEST_DECODING = {
    info.api_key: {
        v: (
            info.request_header_version(v),
            RequestHeader._DECODERS[info.request_header_version(v)],
            info.request._DECODERS[v],
            info.request,
        )
        for v in info.versions
    }
    for info in APIS.values()
}
#: Api key -> {version: (the response header's decoder, the response body's decoder, response class)}.
_RESPONSE_DECODING = {
    info.api_key: {
        v: (ResponseHeader._DECODERS[info.response_header_version(v)], info.response._DECODERS[v], info.response)
        for v in info.versions
    }
    for info in APIS.values()
}
# (Two comparisons, not ``in range(...)``: a range's membership test does long arithmetic, ~0.2 us.)
_INT32_MIN, _INT32_MAX = -0x80000000, 0x7FFFFFFF


def _request_head(
    api_key: int, version: int, header_version: int, correlation_id: object, client_id: object
) -> Optional[bytearray]:
    """A size placeholder and the request header, written directly; None for a correlation id or client
    id out of the ordinary (a non-int, out of range, non-ASCII), which the generated encoder then writes
    or refuses with the field named."""
    if type(correlation_id) is not int or not _INT32_MIN <= correlation_id <= _INT32_MAX:
        return None
    if cython.compiled:
        # The same bytes, written in place into the buffer kproto.message_base keeps between encodes.
        if header_version != 0:  # ControlledShutdown v0: no client id
            if client_id is None:
                n = -1
            elif type(client_id) is str and client_id.isascii() and len(client_id) <= 0x7FFF:
                n = len(client_id)
            else:
                return None
        out = _take_buffer()
        p = _grow(out, 12)
        _put_i(p, 0, 0)
        _put_h(p, 4, api_key)
        _put_h(p, 6, version)
        _put_i(p, 8, correlation_id)
        if header_version != 0:
            _put_h(_grow(out, 2), 0, n)
            if n > 0:
                _put_text(out, client_id)
            if header_version == 2:
                _grow(out, 1)[0] = 0  # no tagged fields
        return out
    out = bytearray(_REQUEST_HEAD.pack(0, api_key, version, correlation_id))
    if header_version == 0:
        return out  # ControlledShutdown v0: no client id
    if client_id is None:
        out += b"\xff\xff"
    elif type(client_id) is str and client_id.isascii() and len(client_id) <= 0x7FFF:
        out += I16.pack(len(client_id))
        out += client_id.encode("ascii")
    else:
        return None
    if header_version == 2:
        out.append(0)  # no tagged fields
    return out


def encode_request(msg: Message, version: int, correlation_id: int, client_id: Optional[str] = "") -> bytes:
    """The size-prefixed frame of request ``msg`` in ``version``, with the header version it takes
    (v2 in flexible versions, v1 before, v0 for ControlledShutdown v0).

    ``client_id`` ``None`` is written as a null string; ControlledShutdown v0's header has no client id at
    all, so it is not written there.
    """
    framing = _REQUEST_FRAMING.get(type(msg))
    header_version = framing[1].get(version) if framing is not None and type(version) is int else None
    out = None
    if header_version is not None:
        out = _request_head(framing[0], version, header_version, correlation_id, client_id)  # type: ignore[index]
    if out is None:
        info = _encodable(msg, version, "request")
        header = RequestHeader(
            api_key=info.api_key, api_version=version, correlation_id=correlation_id, client_id=client_id
        )
        out = bytearray(4)
        header.encode_into(out, info.request_header_version(version))
    msg.encode_into(out, version)
    return _frame(out)


def encode_response(msg: Message, version: int, correlation_id: int) -> bytes:
    """The size-prefixed frame of response ``msg`` in ``version``, with the header version it takes
    (v1 in flexible versions, v0 before and for every ApiVersions response)."""
    framing = _RESPONSE_FRAMING.get(type(msg))
    header_version = framing[1].get(version) if framing is not None and type(version) is int else None
    if header_version is not None and type(correlation_id) is int and _INT32_MIN <= correlation_id <= _INT32_MAX:
        if cython.compiled:  # as _request_head: in place, into the kept buffer
            out = _take_buffer()
            p = _grow(out, 8)
            _put_i(p, 0, 0)
            _put_i(p, 4, correlation_id)
        else:
            out = bytearray(RESPONSE_HEAD.pack(0, correlation_id))
        if header_version == 1:
            out.append(0)  # no tagged fields
    else:
        info = _encodable(msg, version, "response")
        out = bytearray(4)
        ResponseHeader(correlation_id=correlation_id).encode_into(out, info.response_header_version(version))
    msg.encode_into(out, version)
    return _frame(out)


def check_frame(frame: Bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> bytes:
    """``frame`` as bytes, after checking that its size prefix matches its length."""
    buf = frame if type(frame) is bytes else bytes(frame)
    if len(buf) < 4:
        raise DecodeError(f"need 4 bytes at offset 0, {len(buf)} left", 0, "size")
    size = I32.unpack_from(buf, 0)[0]
    if size < 0 or size > max_frame_size:
        raise LimitExceededError(f"frame size {size} outside 0..{max_frame_size}", 0, "size")
    if size != len(buf) - 4:
        raise LengthMismatchError(
            f"frame size {size} disagrees with the {len(buf) - 4} bytes that follow it", 0, "size"
        )
    return buf


def decode_request_header(frame: Bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> Tuple[RequestHeader, int]:
    """The request header and the offset where the body starts, for any api key (known or not).

    Unknown api keys and versions are read with header v1 (its fields open header v2 too, so the api key,
    version, correlation id and client id are right whichever a newer version uses).
    """
    buf = check_frame(frame, max_frame_size)
    if len(buf) < 8:
        raise DecodeError(f"need 4 bytes at offset 4, {len(buf) - 4} left", 4, "api_key")
    api_key, version = buf[4] << 8 | buf[5], buf[6] << 8 | buf[7]
    api_key -= (api_key & 0x8000) << 1
    version -= (version & 0x8000) << 1
    info = APIS.get(api_key)
    header_version = 1
    if info is not None and version in info.versions:
        header_version = info.request_header_version(version)
    header, pos = RequestHeader.decode_from(buf, 4, len(buf), header_version)
    if header_version == 0:
        header.client_id = None
    return header, pos


def _decode_body(cls: type, buf: Bytes, pos: int, version: int) -> Tuple[Message, int]:
    return cls.decode_from(buf, pos, len(buf), version)  # type: ignore[attr-defined, no-any-return]


def _decode_frame(
    header_decoder: Callable[..., Any], body_decoder: Callable[..., Any], buf: bytes, cls: type, version: int
) -> Tuple[Any, Any]:
    """Header and body of a checked frame by their generated decoders (the fast path of
    decode_request/decode_response: what decode_from does, without its per-call lookups and checks)."""
    cursor = Cursor(4)
    header = header_decoder(buf, cursor, len(buf))
    msg = body_decoder(buf, cursor, len(buf))
    if cursor.pos != len(buf):
        raise trailing_bytes(f"{cls.__name__} v{version}", cursor.pos, len(buf))
    return header, msg


def decode_request(frame: Bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> Tuple[RequestHeader, Message]:
    """``(header, message)`` from a request frame; the api key and version come from the header."""
    buf = check_frame(frame, max_frame_size)
    if len(buf) >= 8:
        api_key, version = buf[4] << 8 | buf[5], buf[6] << 8 | buf[7]
        version -= (version & 0x8000) << 1
        codecs = _REQUEST_DECODING.get(api_key - ((api_key & 0x8000) << 1))
        entry = None if codecs is None else codecs.get(version)
        if entry is not None:
            header_version, header_decoder, body_decoder, cls = entry
            header, msg = _decode_frame(header_decoder, body_decoder, buf, cls, version)
            if header_version == 0:
                header.client_id = None
            return header, msg
    header, pos = decode_request_header(buf, max_frame_size)
    info = _api_for(header.api_key, header.api_version, "request header", 4)
    msg, end = _decode_body(info.request, buf, pos, header.api_version)
    if end != len(buf):
        raise trailing_bytes(f"{info.request.__name__} v{header.api_version}", end, len(buf))
    return header, msg


def _decode_response(
    frame: Bytes, api_key: int, version: int, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
) -> Tuple[ResponseHeader, Message]:
    """``(header, message)`` from a response frame; a response does not say what it answers, so the
    caller gives the api key and version of the request it pairs with (they also choose the header
    version).  An unknown api key or version is an :class:`UnknownVersionError`."""
    buf = check_frame(frame, max_frame_size)
    codecs = _RESPONSE_DECODING.get(api_key) if type(api_key) is int and type(version) is int else None
    entry = None if codecs is None else codecs.get(version)
    if entry is not None:
        header_decoder, body_decoder, cls = entry
        return _decode_frame(header_decoder, body_decoder, buf, cls, version)
    info = _api_for(api_key, version, "decode_response")
    header, pos = ResponseHeader.decode_from(buf, 4, len(buf), info.response_header_version(version))
    msg, end = _decode_body(info.response, buf, pos, version)
    if end != len(buf):
        raise trailing_bytes(f"{info.response.__name__} v{version}", end, len(buf))
    return header, msg


if TYPE_CHECKING:  # one overload per api key: the result is that API's response class
    from kproto._generated.typed_decode import decode_response as decode_response
else:
    decode_response = _decode_response


#: Smallest request frame body: api key, api version, correlation id (ControlledShutdown v0 has no client id).
MIN_REQUEST_SIZE = 8
_REQUEST_HEAD = struct.Struct(">ihhi")  # size, api_key, api_version, correlation_id


def plausible_request_header(buf: Bytes, pos: int, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> Optional[bool]:
    """Whether a request frame plausibly starts at ``buf[pos]``: None when more bytes are needed to tell.

    Used to find the next frame boundary after lost or garbage bytes (captures, pasted dumps): the size is
    within limits, the api key and version are known, and the client id, if the header has one, fits the
    frame and is printable ASCII, as every real client's is.
    """
    if len(buf) - pos < 12:
        return None
    size, api_key, version, _ = _REQUEST_HEAD.unpack_from(buf, pos)
    if size < MIN_REQUEST_SIZE or size > max_frame_size:
        return False
    info = APIS.get(api_key)
    if info is None or version not in info.versions:
        return False
    if info.request_header_version(version) == 0:
        return True
    if len(buf) - pos < 14:
        return None
    length = (buf[pos + 12] << 8) | buf[pos + 13]
    if length == 0xFFFF:  # -1: a null client id
        return True
    if length & 0x8000 or 10 + length > size:
        return False
    # Judge the client id bytes already here, so that garbage is refused at once rather than waited for
    # (with every modern api version valid, many more stray byte runs pass the checks above).
    if not all(0x20 <= b < 0x7F for b in buf[pos + 14 : pos + 14 + length]):
        return False
    return None if len(buf) - pos < 14 + length else True


class FrameReader:
    """Split a byte stream into frames, whatever the chunking: the strict policy over
    :class:`ResyncingSplitter`.

    ``feed(data)`` returns the frames completed by ``data`` (each including its size prefix).  A length
    prefix that is negative or larger than ``max_frame_size`` raises :class:`LimitExceededError` at once,
    before anything is buffered for it, and the reader stays failed: a stream that lost its framing cannot
    be trusted again (a live socket has no garbage to skip, so this reader never resyncs).  Memory held is
    at most one frame plus one ``feed``.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must be >= 0")
        self.max_frame_size = max_frame_size
        self._splitter = ResyncingSplitter()
        self._error: Optional[DecodeError] = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._splitter.buf)

    @property
    def stream_offset(self) -> int:
        """Stream offset of the first byte not yet returned."""
        return self._splitter.base

    @property
    def pending_frame_size(self) -> Optional[int]:
        """Total size (prefix included) of the incomplete frame being received, once its size prefix
        has arrived; None while fewer than four bytes of it are held.  Lets a server reserve memory for
        the whole frame before it arrives, as Kafka's request memory pool does."""
        splitter = self._splitter
        if splitter.need is not None:
            return splitter.need
        if len(splitter.buf) < 4:
            return None
        return 4 + I32.unpack_from(splitter.buf, 0)[0]

    def feed(self, data: Bytes) -> List[bytes]:
        if self._error is not None:
            raise self._error
        splitter = self._splitter
        splitter.buf += data
        frames = splitter.frames(0, self.max_frame_size)
        if splitter.bad_size is not None:
            self._error = LimitExceededError(
                f"frame size {splitter.bad_size} outside 0..{self.max_frame_size}", splitter.base, "size"
            )
            raise self._error
        return frames

    def close(self) -> None:
        """Declare the end of the stream: bytes of an incomplete frame left over are an error."""
        if self._error is None and self.buffered:
            raise DecodeError(
                f"stream ended inside a frame ({self.buffered} bytes of it received)", self.stream_offset, "size"
            )


#: Smallest response frame body: the correlation id (response header v0); every response body follows it.
MIN_RESPONSE_SIZE = 4
#: The fixed start of every request frame: size, api_key, api_version, correlation_id.  Code that must
#: look at a frame it cannot decode (captures, resync) reads these four fields with this one layout.
REQUEST_HEAD = _REQUEST_HEAD
#: The fixed start of every response frame: size, correlation_id.
RESPONSE_HEAD = struct.Struct(">ii")
_PRODUCE_KEY = 0


def expects_response(header: RequestHeader, message: Optional[Message]) -> bool:
    """Whether a broker answers this request: every request is answered except a Produce with
    ``acks == 0`` (docs/protocol-notes.md, "Requests that get no response").  ``message`` None (a body
    that did not decode) counts as answered, the safe guess for pairing."""
    return not (header.api_key == _PRODUCE_KEY and getattr(message, "acks", None) == 0)


#: Where a request header may start: a size below 128 MiB (first byte 0..7), api key 0..255, version 0..255.
#: A fast first filter for :meth:`ResyncingSplitter.resync` over long garbage; it only proposes
#: positions, the plausibility check decides.  Valid while the largest frame accepted is below 128 MiB.
REQUEST_CANDIDATE = re.compile(rb"(?=[\x00-\x07][\x00-\xff]{3}\x00[\x00-\xff]\x00[\x00-\xff])")
#: Bytes kept after a scan that found no request candidate: a header may start in the last bytes seen.
_CANDIDATE_TAIL = 13


class ResyncingSplitter:
    """The frame boundaries of one byte stream that may lose its framing: one splitter for every reader
    that must survive bad input (captures, files of frames).

    Sans-I/O: the owner appends bytes to :attr:`buf`, then calls :meth:`next_frame` until it returns
    None.  The *policy* stays with the owner, because what a lost framing means differs by reader:

    * a size prefix outside ``min_size..max_size`` makes :meth:`next_frame` return None with
      :attr:`bad_size` set and nothing consumed.  A strict reader fails the stream there (what
      :class:`FrameReader` does for a live socket); a resyncing reader reports it, calls
      :meth:`lose_sync` and then :meth:`resync` with its own plausibility test (a request header, or
      a response to an outstanding request) until a boundary is found;
    * bytes dropped while unsynced are counted: :meth:`take_skipped` hands back ``(offset, count)`` of
      the run skipped since the last report, so every reader reports skipped bytes the same way.

    Offsets are stream offsets (bytes since the start of the stream).  ``damaged_at``, set by an owner
    that filled a capture gap inside a frame with zeros, travels with that frame.
    """

    __slots__ = ("buf", "base", "synced", "need", "damaged_at", "bad_size", "_skipped", "_skipped_from")

    def __init__(self, synced: bool = True) -> None:
        self.buf = bytearray()
        self.base = 0  # stream offset of buf[0]
        self.synced = synced  # buf[0] is a frame start
        self.need: Optional[int] = None  # total length of the frame at buf[0], once its size is read
        self.damaged_at: Optional[int] = None  # first missing byte within the current frame
        self.bad_size: Optional[int] = None  # the size prefix at buf[0] that next_frame refused
        self._skipped = 0
        self._skipped_from = 0

    @property
    def skipped(self) -> int:
        """Bytes skipped since the last :meth:`take_skipped`."""
        return self._skipped

    def next_frame(self, min_size: int, max_size: int) -> Optional[Tuple[bytes, int, Optional[int]]]:
        """``(frame, stream offset, damaged_at)`` of the next complete frame (size prefix included), or
        None: more bytes are needed, the splitter is not synced, or the size prefix is outside
        ``min_size..max_size`` (then :attr:`bad_size` holds it and nothing is consumed)."""
        self.bad_size = None
        if not self.synced:
            return None
        buf = self.buf
        need = self.need
        if need is None:
            need = self.need = self._frame_length(0, min_size, max_size)
            if need is None:
                return None
        if len(buf) < need:
            return None
        frame = bytes(buf[:need])
        offset = self.base
        damaged_at = self.damaged_at
        del buf[:need]
        self.base += need
        self.need = None
        self.damaged_at = None
        return frame, offset, damaged_at

    def _frame_length(self, at: int, min_size: int, max_size: int) -> Optional[int]:
        """Total length of the frame whose size prefix starts at ``buf[at]``; None while the prefix is
        incomplete, or when it is outside ``min_size..max_size`` (then :attr:`bad_size` holds it)."""
        if len(self.buf) - at < 4:
            return None
        size: int = I32.unpack_from(self.buf, at)[0]
        if size < min_size or size > max_size:
            self.bad_size = size
            return None
        return size + 4

    def frames(self, min_size: int, max_size: int) -> List[bytes]:
        """Every complete frame buffered, in order, as :meth:`next_frame` would return them one by one
        (stopping likewise at a refused size prefix), but cut out of the buffer in one go: the batch form
        for a reader with no use for offsets or damage marks, such as a live connection's."""
        self.bad_size = None
        frames: List[bytes] = []
        if not self.synced:
            return frames
        buf = self.buf
        size_of = I32.unpack_from
        held = len(buf)
        start = 0
        need = self.need
        while True:
            if need is None:  # _frame_length's rule, inline: this loop is a live connection's per-frame cost
                if held - start < 4:
                    break
                size = size_of(buf, start)[0]
                if size < min_size or size > max_size:
                    self.bad_size = size
                    break
                need = size + 4
            end = start + need
            if end > held:
                break
            frames.append(bytes(buf[start:end]))
            start = end
            need = None
        self.need = need
        if start:
            del buf[:start]
            self.base += start
            self.damaged_at = None
        return frames

    def drop(self, n: int, counted: bool = True) -> None:
        """Forget the first ``n`` buffered bytes; ``counted``: they are skipped bytes to report."""
        if n:
            del self.buf[:n]
            self.base += n
            if counted:
                self.skip_counted(self.base - n, n)

    def skip_counted(self, offset: int, n: int) -> None:
        """Count ``n`` bytes from stream ``offset`` as skipped (the first run sets the offset reported)."""
        if n:
            if not self._skipped:
                self._skipped_from = offset
            self._skipped += n

    def lose_sync(self, drop: int) -> None:
        """The framing is lost: drop (and count) ``drop`` bytes at the front; :meth:`resync` follows."""
        self.drop(drop)
        self.synced = False
        self.need = None
        self.damaged_at = None

    def resync(
        self,
        plausible: Callable[[Bytes, int], Optional[bool]],
        *,
        final: bool = False,
        candidates: Optional[Pattern[bytes]] = None,
        max_keep: Optional[int] = None,
    ) -> bool:
        """Skip to the first position where ``plausible(buf, pos)`` says a frame starts; True when found
        (the splitter is then synced at it).  ``plausible`` returns None when it needs more bytes: the
        scan stops there to wait, unless ``final`` (no more bytes will come; None counts as no).
        ``candidates`` (such as :data:`REQUEST_CANDIDATE`) proposes the positions to test instead of
        every byte.  When nothing is found and more than ``max_keep`` bytes are left, they go too."""
        buf = self.buf
        keep_from = len(buf)
        if candidates is not None:
            scanned: Bytes = bytes(buf)  # a copy: the buffer cannot shrink while a regex iterates over it
            positions: Iterable[int] = (match.start() for match in candidates.finditer(scanned))
            if not final:
                keep_from = max(0, len(buf) - _CANDIDATE_TAIL)
        else:
            scanned = buf
            positions = range(len(buf))
        for pos in positions:
            verdict = plausible(scanned, pos)
            if verdict is None and not final:
                keep_from = pos
                break
            if verdict:
                self.drop(pos)
                self.synced = True
                self.need = None
                self.damaged_at = None
                return True
        self.drop(keep_from)
        if max_keep is not None and len(self.buf) > max_keep:
            self.drop(len(self.buf))
        return False

    def take_skipped(self) -> Optional[Tuple[int, int]]:
        """``(stream offset, count)`` of the bytes skipped since the last call, or None if there were none."""
        if not self._skipped:
            return None
        run = (self._skipped_from, self._skipped)
        self._skipped = 0
        return run


# Last, once every name is defined: where the build compiled a copy of this module, that copy's names take
# the place of these (see kproto._backend.adopt_compiled_copy); KPROTO_PURE=1 keeps these.
from kproto._backend import adopt_compiled_copy  # noqa: E402  (it loads the record core, which may import this module)

adopt_compiled_copy(globals())
