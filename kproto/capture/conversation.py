"""Kafka conversations in reassembled TCP streams: frames, request/response pairing, problems.

:class:`KafkaConversations` is sans-I/O like the reassembler it follows: :meth:`~KafkaConversations.feed`
takes :mod:`kproto.capture.reassembly` events in capture order, :meth:`~KafkaConversations.records`
hands back :class:`Exchange` and :class:`Problem` records in the order they became known.
:func:`decode_capture` runs file → segments → reassembly → conversations in one call.

Which side is the client
    A connection with exactly one endpoint on a server port (``ports``, default ``{9092}``) has its
    client on the other endpoint.  Otherwise, with ``detect=True`` (the default), a connection is taken
    for Kafka when its first frame from the client (the initiator when the handshake was captured;
    without handshake, the first direction in which a plausible request header is found) decodes
    completely as a request: api key 0-16, a version kproto knows, a printable client id.  Connections
    that fail this test are ignored silently (counted in :attr:`KafkaConversations.stats`), except
    one that opens with an ApiVersions request in a version kproto does not know (below).

Frames
    A frame is an int32 size plus that many bytes.  A size that is negative or above
    ``max_frame_size`` is a ``frame-too-large`` problem and loses the framing.  A gap inside a frame
    whose size is known costs only that frame (``incomplete-frame``; if its header survived, the request
    is still registered, so its response pairs).  A gap over a size prefix, a bad size, or a connection
    caught mid-stream loses the framing: the stream is scanned for the next plausible boundary (a
    request header as described above, or, from the server, a size followed by the correlation id of an
    outstanding request), and the bytes skipped are reported (``resync-skipped``).  Scanning looks at
    most ``max_resync_bytes`` per attempt before discarding what it has seen.

Pairing
    Responses pair with requests by correlation id per connection, with the *oldest* outstanding
    request carrying that id (ids may repeat over a long connection).  A Kafka broker answers the
    requests of one connection in order, so when a response pairs, outstanding requests older than its
    request will never be answered: they are reported at once (``unanswered-request``, with an
    :class:`Exchange` that has no response), as are requests still outstanding when the connection
    closes or the capture ends.  Produce requests with ``acks == 0`` expect no response and produce an
    :class:`Exchange` at once.  At most ``max_outstanding`` requests wait per connection; beyond that
    the oldest is reported unanswered.

ApiVersions newer than kproto
    A client newer than the broker opens with its own newest ApiVersions version (franz-go does).
    Kafka reads only the header of such a request and answers ``UNSUPPORTED_VERSION`` in the v0 layout
    with the range it serves, from which the client picks the version it retries with.  kproto reads the
    same way: the request keeps its header and a ``request_error`` for the body, the answer is read in
    v0 (:attr:`Exchange.response_version` is 0), and no problem is reported — it is a negotiation step,
    not something missing.  Any other answer (the broker knew the version) leaves the request an
    ``unsupported-version`` problem, reported when the answer or its absence is known.

SASL
    A ``SaslHandshake`` answered without error names the connection's mechanism.  After version 0 of
    it the client sends the mechanism's tokens raw (an int32 size and the bytes, no Kafka header) and
    the server answers each the same way, an empty token included: these frames become
    :class:`SaslToken` records (with ``sasl_records=True``; otherwise they are only counted), paired in
    order.  How many tokens the client sends comes from the mechanism (PLAIN and OAUTHBEARER one, SCRAM
    two); for others (GSSAPI) a client frame that decodes as a Kafka request ends them.  A token left
    unanswered when the connection ends (a v0 server closes the connection when authentication fails)
    is an ``unanswered-request``.  ``SaslAuthenticate`` exchanges carry the mechanism in
    :attr:`Exchange.sasl_mechanism`.  Tokens are kept as captured: redacting secrets is the job of
    whoever shows them (:mod:`kproto.capture.sasl`).

TLS
    The first bytes of each direction of a connection on a server port are checked for a TLS record
    (:mod:`kproto.capture.tls`; no Kafka frame can start like one).  A ClientHello (or, when the start of
    the connection was not captured, any TLS record) makes one ``tls-encrypted`` problem naming the SNI
    and version, and the connection is not decoded further — not a run of frame errors.  A server that
    answers a plaintext request with a TLS alert (a TLS port), or closes after a ClientHello without a
    ServerHello (a plaintext port), gives a ``tls-mismatch`` problem.  Neither is a decoding failure.

Nothing is dropped: every frame ends in an :class:`Exchange`, a :class:`Problem`, a :class:`SaslToken`,
or both (a decode error gives an exchange carrying the error and a problem saying where).
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Collection, Deque, Dict, Iterator, List, Optional, Tuple, Union

import kproto
from kproto.capture.diagnostics import CaptureDiagnostic
from kproto.capture.files import DEFAULT_MAX_RECORD_BYTES, CaptureSource
from kproto.capture.reader import CaptureReader
from kproto.capture.sasl import raw_token_count
from kproto.capture.tls import MAX_START_BYTES, record_length, tls_start
from kproto.capture.reassembly import (
    DEFAULT_MAX_BUFFERED_BYTES,
    DEFAULT_MAX_OPEN_CONNECTIONS,
    ConnectionId,
    Direction,
    Endpoint,
    StreamClosed,
    StreamData,
    StreamEvent,
    StreamGap,
    TcpReassembler,
)
from kproto.errors import DecodeError, KprotoError, LengthMismatchError, UnknownVersionError, UnsupportedVersionError
from kproto.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    MIN_REQUEST_SIZE,
    MIN_RESPONSE_SIZE,
    REQUEST_HEAD,
    ResyncingSplitter,
    decode_request_header,
    expects_response,
    plausible_request_header,
)

__all__ = [
    "ProblemKind",
    "NOT_DAMAGE_KINDS",
    "Problem",
    "Exchange",
    "SaslToken",
    "ConversationStats",
    "KafkaConversations",
    "decode_capture",
    "DEFAULT_PORTS",
]

#: Server ports assumed when none are given.
DEFAULT_PORTS = frozenset({9092})

_I32 = struct.Struct(">i")
_SASL_HANDSHAKE = 17
_API_VERSIONS = 18
_UNSUPPORTED_VERSION = 35
_SASL_AUTHENTICATE = 36
_MIN_REQUEST = MIN_REQUEST_SIZE
_MIN_RESPONSE = MIN_RESPONSE_SIZE


class ProblemKind(str, enum.Enum):
    """What a :class:`Problem` is about; values are stable strings for tables and logs."""

    CAPTURE = "capture"  #: a diagnostic of the capture reader (file damage, fragments, ...)
    CAPTURE_GAP = "capture-gap"  #: bytes of a stream missing from the capture
    FRAME_TOO_LARGE = "frame-too-large"  #: a size prefix outside 0..max_frame_size (or below a header)
    INCOMPLETE_FRAME = "incomplete-frame"  #: a frame with bytes missing from the capture
    RESYNC_SKIPPED = "resync-skipped"  #: bytes skipped while looking for a frame boundary
    DECODE_ERROR = "decode-error"  #: a frame that does not decode
    LENGTH_MISMATCH = "length-mismatch"  #: a message that decodes but ends before its frame does
    UNSUPPORTED_VERSION = "unsupported-version"  #: an api key or version kproto does not know
    UNANSWERED_REQUEST = "unanswered-request"  #: a request whose response never came
    RESPONSE_WITHOUT_REQUEST = "response-without-request"  #: a response pairing with no request seen
    STREAM_ENDED_IN_FRAME = "stream-ended-inside-frame"  #: a connection closed in the middle of a frame
    TLS_ENCRYPTED = "tls-encrypted"  #: a connection on a Kafka port speaks TLS (reported once; not decoded)
    TLS_MISMATCH = "tls-mismatch"  #: one side speaks TLS and the other does not


#: Problems that are facts about a conversation or a connection rather than damage: an unanswered request
#: or an unpaired response (often just where the capture started or stopped) and TLS on a Kafka port.
#: Tools that turn problems into an exit status (``kproto pcap``, ``kproto spark``) do not fail on these.
NOT_DAMAGE_KINDS = frozenset(
    {
        ProblemKind.UNANSWERED_REQUEST,
        ProblemKind.RESPONSE_WITHOUT_REQUEST,
        ProblemKind.TLS_ENCRYPTED,
        ProblemKind.TLS_MISMATCH,
    }
)


@dataclass
class Problem:
    """Something in the capture that is not a clean exchange.

    ``offset`` is the stream offset (bytes from the start of that direction's stream) where it was
    found, ``packet`` the capture's frame number of the packet that carried it, when known.  ``frame``
    holds the bytes of a frame nothing else reports (a response without request, an undecodable frame).
    """

    kind: ProblemKind
    detail: str
    connection: Optional[ConnectionId] = None
    direction: Optional[Direction] = None
    offset: Optional[int] = None
    packet: Optional[int] = None
    timestamp_ns: Optional[int] = None
    frame: Optional[bytes] = field(default=None, repr=False)

    def __str__(self) -> str:
        where = []
        if self.connection is not None:
            where.append(str(self.connection))
        if self.direction is not None and self.connection is not None:
            src = self.connection.source(self.direction)
            where.append(f"from {src}")
        if self.offset is not None:
            where.append(f"stream offset {self.offset}")
        if self.packet is not None:
            where.append(f"packet {self.packet}")
        return (
            f"{self.kind.value} ({', '.join(where)}): {self.detail}" if where else f"{self.kind.value}: {self.detail}"
        )


@dataclass
class Exchange:
    """A request and its response (or the lack of one).

    Times are the capture times of the packets that completed each frame; ``latency_ns`` is their
    difference.  Sizes are frame sizes including the 4-byte size prefix.  ``request``/``response`` are
    the decoded messages, ``None`` when decoding failed (``request_error``/``response_error`` then say
    why) or, for the response, when none came (``expects_response`` is false for acks=0 Produce).
    """

    connection: ConnectionId
    client: Endpoint
    server: Endpoint
    api_key: int
    api_version: int
    correlation_id: int
    request_header: Optional[Any]
    request: Optional[Any]
    request_error: Optional[KprotoError]
    request_size: int
    request_offset: int
    request_packet: Optional[int]
    request_time_ns: Optional[int]
    expects_response: bool = True
    response_header: Optional[Any] = None
    response: Optional[Any] = None
    response_error: Optional[KprotoError] = None
    response_size: Optional[int] = None
    response_offset: Optional[int] = None
    response_packet: Optional[int] = None
    response_time_ns: Optional[int] = None
    #: For SaslAuthenticate: the mechanism its connection's SaslHandshake named (None when not captured).
    sasl_mechanism: Optional[str] = None
    #: The version the response was read in when it is not ``api_version``: 0 for the answer to an
    #: ApiVersions request newer than the server (and kproto) know, which Kafka writes in the v0 layout.
    response_version: Optional[int] = None

    @property
    def api_name(self) -> str:
        info = kproto.APIS.get(self.api_key)
        return info.name if info is not None else f"api-{self.api_key}"

    @property
    def answered(self) -> bool:
        return self.response_size is not None

    @property
    def latency_ns(self) -> Optional[int]:
        if self.request_time_ns is None or self.response_time_ns is None:
            return None
        return self.response_time_ns - self.request_time_ns


@dataclass
class SaslToken:
    """One raw SASL token after ``SaslHandshake`` v0 and the server's answer to it (see module docs).

    ``step`` counts the client's tokens on the connection from 1; ``response_token`` is None when no
    answer was captured (an empty answer is ``b""``).  Tokens are as captured, secrets included.
    """

    connection: ConnectionId
    client: Endpoint
    server: Endpoint
    mechanism: Optional[str]
    step: int
    request_token: bytes
    request_offset: int
    request_packet: Optional[int]
    request_time_ns: Optional[int]
    response_token: Optional[bytes] = None
    response_offset: Optional[int] = None
    response_packet: Optional[int] = None
    response_time_ns: Optional[int] = None

    @property
    def answered(self) -> bool:
        return self.response_token is not None


Record = Union[Exchange, Problem, SaslToken]


@dataclass
class ConversationStats:
    """Counters over everything fed so far."""

    kafka_connections: int = 0
    ignored_connections: int = 0  #: connections not on a server port that did not look like Kafka
    requests: int = 0
    responses: int = 0
    exchanges: int = 0
    sasl_tokens: int = 0  #: raw SASL tokens from clients (after SaslHandshake v0)
    encrypted_connections: int = 0  #: connections on a server port found to speak TLS
    problems: Dict[str, int] = field(default_factory=dict)


class _Framer(ResyncingSplitter):
    """Frame boundaries of one direction of one connection: the shared resyncing splitter, and whether
    that direction has closed."""

    __slots__ = ("closed",)

    def __init__(self, synced: bool) -> None:
        super().__init__(synced)
        self.closed = False


class _Pending:
    __slots__ = (
        "api_key",
        "version",
        "correlation_id",
        "header",
        "message",
        "error",
        "size",
        "offset",
        "packet",
        "ts",
        "held_problem",
    )

    def __init__(
        self,
        api_key: int,
        version: int,
        correlation_id: int,
        header: Any,
        message: Any,
        error: Optional[KprotoError],
        size: int,
        offset: int,
        packet: Optional[int],
        ts: Optional[int],
    ) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.header = header
        self.message = message
        self.error = error
        self.size = size
        self.offset = offset
        self.packet = packet
        self.ts = ts
        # An ApiVersions request newer than kproto knows: its problem waits for the answer (see _on_response).
        self.held_problem: Optional[Tuple[Any, ...]] = None


class _Conn:
    __slots__ = (
        "cid",
        "client_dir",
        "kafka",
        "framers",
        "pending",
        "examined",
        "tls",
        "server_spoke",
        "mechanism",
        "raw_tokens",
        "tokens",
        "token_step",
    )

    def __init__(self, cid: ConnectionId, client_dir: Optional[Direction], kafka: Optional[bool]) -> None:
        self.cid = cid
        self.client_dir = client_dir
        self.kafka = kafka  # True: Kafka; None: not decided yet; False: ignored
        self.framers = (_Framer(cid.syn_seen), _Framer(cid.syn_seen))
        self.pending: Deque[_Pending] = deque()
        self.examined = [False, False]  # whether each direction's first bytes were checked for TLS
        self.tls: Optional[str] = None  # "client": the client opened TLS; "other": TLS seen otherwise
        self.server_spoke = False
        self.mechanism: Optional[str] = None  # the SASL mechanism of the last successful SaslHandshake
        # Raw SASL tokens the client still sends: None = not in raw mode; -1 = until a Kafka request.
        self.raw_tokens: Optional[int] = None
        self.tokens: Deque[SaslToken] = deque()  # raw tokens awaiting the server's answer
        self.token_step = 0


def _newer_api_versions(header: Any, exc: KprotoError) -> bool:
    """An ApiVersions request in a version kproto does not know (a client newer than kproto), with a
    plausible header: a version just past kproto's and a printable client id."""
    client_id = header.client_id
    return (
        header.api_key == _API_VERSIONS
        and isinstance(exc, (UnsupportedVersionError, UnknownVersionError))
        and 0 <= header.api_version < 64
        and (client_id is None or client_id.isprintable())
    )


def _v0_refusal(frame: bytes) -> bool:
    """Whether a response frame is an ApiVersions v0 answer with UNSUPPORTED_VERSION, read in full."""
    try:
        _header, msg = kproto.decode_response(frame, _API_VERSIONS, 0)
    except KprotoError:
        return False
    return bool(getattr(msg, "error_code", None) == _UNSUPPORTED_VERSION)


def _classify(exc: KprotoError) -> ProblemKind:
    if isinstance(exc, (UnsupportedVersionError, UnknownVersionError)):
        return ProblemKind.UNSUPPORTED_VERSION
    if isinstance(exc, LengthMismatchError):
        return ProblemKind.LENGTH_MISMATCH
    return ProblemKind.DECODE_ERROR


class KafkaConversations:
    """Find Kafka frames in reassembled streams and pair requests with responses (see module docs).

    ``ports``: server ports; ``detect``: also recognise Kafka on other ports by its request headers;
    ``max_frame_size``: largest frame accepted (Kafka's default ``socket.request.max.bytes``, 100 MiB);
    ``max_outstanding``: requests waiting for a response per connection; ``max_resync_bytes``: bytes
    scanned for a frame boundary before the scanned part is discarded; ``sasl_records``: also hand back
    raw SASL tokens as :class:`SaslToken` records (off by default so that consumers written for
    exchanges and problems only see those).
    """

    def __init__(
        self,
        *,
        ports: Collection[int] = DEFAULT_PORTS,
        detect: bool = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_outstanding: int = 1024,
        max_resync_bytes: int = 1 << 20,
        sasl_records: bool = False,
    ) -> None:
        if max_frame_size < _MIN_REQUEST or max_outstanding < 1 or max_resync_bytes < 64:
            raise ValueError("limits too small")
        self.ports = frozenset(ports)
        self.detect = detect
        self.max_frame_size = max_frame_size
        self.max_outstanding = max_outstanding
        self.max_resync_bytes = max_resync_bytes
        self.sasl_records = sasl_records
        self.stats = ConversationStats()
        self._conns: Dict[ConnectionId, _Conn] = {}
        self._out: List[Record] = []

    # --- public -------------------------------------------------------------------------------------

    def records(self) -> List[Record]:
        """Return (and forget) the records produced since the last call, in the order they were found."""
        out = self._out
        self._out = []
        return out

    def feed(self, event: StreamEvent) -> None:
        """Process one reassembly event."""
        conn = self._conns.get(event.connection)
        if conn is None:
            conn = self._new_conn(event.connection)
        if conn.kafka is False:
            return
        d = event.direction
        fr = conn.framers[d]
        if type(event) is StreamData:
            if conn.tls is not None:
                conn.server_spoke = conn.server_spoke or d != conn.client_dir
                return
            fr.buf += event.data
            if not conn.examined[d] and not self._examine(conn, d, event.timestamp_ns, event.packet):
                return
            self._pump(conn, d, event.timestamp_ns, event.packet)
        elif type(event) is StreamGap:
            if conn.kafka:
                self._problem(
                    ProblemKind.CAPTURE_GAP,
                    f"{event.length} bytes missing ({event.reason})",
                    conn,
                    d,
                    event.offset,
                    event.packet,
                    event.timestamp_ns,
                )
            self._gap(conn, d, event.offset, event.length, event.timestamp_ns, event.packet)
        elif type(event) is StreamClosed:
            if event.reason == "evicted" and conn.kafka and d == Direction.FORWARD:
                self._problem(
                    ProblemKind.CAPTURE,
                    "connection no longer followed: more connections open at once than max_open_connections",
                    conn,
                    d,
                    event.offset,
                    event.packet,
                    event.timestamp_ns,
                )
            self._close(conn, d, event.offset, event.timestamp_ns, event.packet)

    def add_capture_diagnostic(self, diag: CaptureDiagnostic) -> None:
        """Pass a capture reader diagnostic through as a :class:`Problem` (keeps capture order)."""
        self._problem(ProblemKind.CAPTURE, str(diag), None, None, None, diag.packet, None)

    def finish(self) -> None:
        """End of input: report what is still outstanding or half-framed."""
        for conn in list(self._conns.values()):
            for d in (Direction.FORWARD, Direction.REVERSE):
                if conn.kafka is not False and not conn.framers[d].closed:
                    fr = conn.framers[d]
                    self._close(conn, d, fr.base + len(fr.buf), None, None)
        self._conns.clear()

    # --- connection setup -----------------------------------------------------------------------------

    def _new_conn(self, cid: ConnectionId) -> _Conn:
        ports = self.ports
        init_srv = cid.initiator.port in ports
        resp_srv = cid.responder.port in ports
        client: Optional[Direction]
        kafka: Optional[bool]
        if resp_srv and not init_srv:
            client, kafka = Direction.FORWARD, True
        elif init_srv and not resp_srv:
            client, kafka = Direction.REVERSE, True
        elif init_srv and resp_srv:
            client, kafka = (Direction.FORWARD if cid.syn_seen else None), True
        elif self.detect:
            client, kafka = (Direction.FORWARD if cid.syn_seen else None), None
        else:
            client, kafka = None, False
        conn = _Conn(cid, client, kafka)
        if kafka:
            self.stats.kafka_connections += 1
        elif kafka is False:
            self.stats.ignored_connections += 1
        self._conns[cid] = conn
        return conn

    # --- TLS ------------------------------------------------------------------------------------------------

    def _examine(self, conn: _Conn, d: Direction, ts: Optional[int], packet: Optional[int]) -> bool:
        """Check the first bytes of a direction for TLS; False when framing must not go on (yet)."""
        fr = conn.framers[d]
        head = bytes(fr.buf[:MAX_START_BYTES])
        if len(head) < 5:
            return False  # too few bytes to tell: wait for more
        length = record_length(head)
        if length is not None and len(head) < 5 + length and len(head) < MAX_START_BYTES:
            return False  # a TLS record not complete yet: read its hello whole
        conn.examined[d] = True
        start = tls_start(head) if length is not None else None
        if start is None:
            return True
        if not conn.kafka:
            if conn.kafka is None:
                self._reject(conn)
            return False
        from_client = d == conn.client_dir or (conn.client_dir is None and d == Direction.FORWARD)
        if not from_client and start.content == "alert" and conn.framers[1 - d].base + len(conn.framers[1 - d].buf):
            self._problem(
                ProblemKind.TLS_MISMATCH,
                f"the server answered plaintext Kafka with a {start.describe()}: the port expects TLS",
                conn,
                d,
                fr.base,
                packet,
                ts,
            )
        else:
            what = start.describe() if start.hello else f"{start.describe()}, its handshake not captured"
            self._problem(
                ProblemKind.TLS_ENCRYPTED,
                f"{what}: the connection is encrypted, its Kafka traffic cannot be decoded",
                conn,
                d,
                fr.base,
                packet,
                ts,
            )
            self.stats.encrypted_connections += 1
        conn.tls = "client" if from_client and start.hello == "ClientHello" else "other"
        conn.server_spoke = not from_client
        for framer in conn.framers:
            framer.buf = bytearray()
        conn.pending.clear()
        return False

    def _reject(self, conn: _Conn) -> None:
        conn.kafka = False
        conn.framers = (_Framer(False), _Framer(False))
        conn.pending.clear()
        self.stats.ignored_connections += 1

    # --- framing ----------------------------------------------------------------------------------------

    def _pump(self, conn: _Conn, d: Direction, ts: Optional[int], packet: Optional[int]) -> None:
        fr = conn.framers[d]
        while conn.kafka is not False and conn.tls is None:
            if not fr.synced:
                if not self._resync(conn, d, ts, packet):
                    return
            if d == conn.client_dir:
                minimum = _MIN_REQUEST if conn.raw_tokens is None else 0
            else:
                minimum = _MIN_RESPONSE if not conn.tokens else 0
            found = fr.next_frame(minimum, self.max_frame_size)
            if found is None:
                size = fr.bad_size
                if size is None:
                    return
                if conn.kafka is None:
                    self._reject(conn)
                    return
                self._problem(
                    ProblemKind.FRAME_TOO_LARGE,
                    f"frame size {size} outside {minimum}..{self.max_frame_size}; looking for the next frame",
                    conn,
                    d,
                    fr.base,
                    packet,
                    ts,
                    bytes(fr.buf[:4]),
                )
                fr.lose_sync(1)
                continue
            frame, offset, damaged_at = found
            self._on_frame(conn, d, frame, offset, damaged_at, ts, packet)

    def _report_skipped(self, conn: _Conn, d: Direction, ts: Optional[int], packet: Optional[int]) -> None:
        skipped = conn.framers[d].take_skipped()
        if skipped is not None and conn.kafka:
            self._problem(
                ProblemKind.RESYNC_SKIPPED,
                f"{skipped[1]} bytes skipped looking for a frame boundary",
                conn,
                d,
                skipped[0],
                packet,
                ts,
            )

    def _resync(self, conn: _Conn, d: Direction, ts: Optional[int], packet: Optional[int]) -> bool:
        """Scan for a plausible frame start; on success buf[0] is one and the framer is synced."""
        fr = conn.framers[d]
        as_request = conn.client_dir is None or d == conn.client_dir
        if not as_request and not conn.pending:
            # Nothing to answer yet: a server byte here cannot start a frame we could pair.
            if len(fr.buf) > self.max_resync_bytes:
                fr.drop(len(fr.buf))
            return False
        if as_request:
            found = fr.resync(self._plausible_request, max_keep=self.max_resync_bytes)
        else:
            found = fr.resync(lambda buf, pos: self._plausible_response(conn, buf, pos), max_keep=self.max_resync_bytes)
        if not found:
            return False
        if conn.client_dir is None:
            conn.client_dir = d
        self._report_skipped(conn, d, ts, packet)
        return True

    def _plausible_request(self, buf: Any, pos: int) -> Optional[bool]:
        return plausible_request_header(buf, pos, self.max_frame_size)

    def _plausible_response(self, conn: _Conn, buf: Any, pos: int) -> Optional[bool]:
        if len(buf) - pos < 8:
            return None
        size = _I32.unpack_from(buf, pos)[0]
        if size < _MIN_RESPONSE or size > self.max_frame_size:
            return False
        corr = _I32.unpack_from(buf, pos + 4)[0]
        return any(p.correlation_id == corr for p in conn.pending)

    def _gap(
        self, conn: _Conn, d: Direction, offset: int, length: int, ts: Optional[int], packet: Optional[int]
    ) -> None:
        fr = conn.framers[d]
        assert offset == fr.base + len(fr.buf)
        if fr.synced and fr.need is not None and len(fr.buf) + length <= fr.need:
            # The gap lies inside a frame whose end we know: keep its place with zeros, mark it damaged.
            if fr.damaged_at is None:
                fr.damaged_at = len(fr.buf)
            fr.buf += bytes(length)
            self._pump(conn, d, ts, packet)
            return
        if fr.synced and fr.need is not None:
            # The gap runs past the end of the current frame: that frame is incomplete, the next one lost.
            missing = fr.need - len(fr.buf)
            if fr.damaged_at is None:
                fr.damaged_at = len(fr.buf)
            fr.buf += bytes(missing)
            length -= missing
            self._pump(conn, d, ts, packet)
            if conn.kafka is False:
                return
        # Framing is lost: whatever is buffered cannot be completed.
        if fr.buf:
            if fr.synced and conn.kafka:
                self._problem(
                    ProblemKind.INCOMPLETE_FRAME,
                    "frame size prefix cut by a capture gap",
                    conn,
                    d,
                    fr.base,
                    packet,
                    ts,
                    bytes(fr.buf),
                )
                fr.drop(len(fr.buf), counted=False)
            else:
                fr.drop(len(fr.buf))
        fr.base += length
        fr.synced = False
        fr.need = None
        fr.damaged_at = None

    def _close(self, conn: _Conn, d: Direction, offset: int, ts: Optional[int], packet: Optional[int]) -> None:
        fr = conn.framers[d]
        if fr.closed:
            return
        fr.closed = True
        if conn.kafka:
            if fr.buf:
                if fr.synced:
                    self._problem(
                        ProblemKind.STREAM_ENDED_IN_FRAME,
                        f"stream ended {len(fr.buf)} bytes into a frame"
                        + (f" of {fr.need} bytes" if fr.need is not None else ""),
                        conn,
                        d,
                        fr.base,
                        packet,
                        ts,
                        bytes(fr.buf),
                    )
                else:
                    fr.skip_counted(fr.base, len(fr.buf))
            self._report_skipped(conn, d, ts, packet)
        fr.buf = bytearray()
        if conn.tls == "client" and d != conn.client_dir and not conn.server_spoke and ts is not None:
            self._problem(
                ProblemKind.TLS_MISMATCH,
                "the client opened TLS and the server closed the connection "
                "without a ServerHello: the port does not speak TLS",
                conn,
                d,
                offset,
                packet,
                ts,
            )
        if conn.framers[0].closed and conn.framers[1].closed:
            while conn.tokens:
                self._token_unanswered(
                    conn,
                    conn.tokens.popleft(),
                    "the connection ended (after SaslHandshake v0 "
                    "a server closes the connection when authentication fails)",
                )
            while conn.pending:
                self._unanswered(conn, conn.pending.popleft(), "the connection ended")
            del self._conns[conn.cid]

    # --- frames -----------------------------------------------------------------------------------------

    def _on_frame(
        self,
        conn: _Conn,
        d: Direction,
        frame: bytes,
        offset: int,
        damaged_at: Optional[int],
        ts: Optional[int],
        packet: Optional[int],
    ) -> None:
        if d == conn.client_dir:
            if conn.raw_tokens is not None and self._is_token(conn, frame, damaged_at):
                self._on_token(conn, d, frame, offset, damaged_at, ts, packet)
            else:
                self._on_request(conn, d, frame, offset, damaged_at, ts, packet)
        elif conn.tokens:
            self._on_token_answer(conn, d, frame, offset, damaged_at, ts, packet)
        elif conn.kafka is None:
            self._reject(conn)  # the server spoke before any request: not Kafka
        else:
            self._on_response(conn, d, frame, offset, damaged_at, ts, packet)

    # --- raw SASL tokens --------------------------------------------------------------------------------

    def _is_token(self, conn: _Conn, frame: bytes, damaged_at: Optional[int]) -> bool:
        """Whether a client frame in raw-token mode is a token (see module docs); leaves the mode when not."""
        if conn.raw_tokens == -1 and damaged_at is None and plausible_request_header(frame, 0, self.max_frame_size):
            try:
                kproto.decode_request(frame)
            except KprotoError:
                return True
            conn.raw_tokens = None
            return False
        return True

    def _on_token(
        self,
        conn: _Conn,
        d: Direction,
        frame: bytes,
        offset: int,
        damaged_at: Optional[int],
        ts: Optional[int],
        packet: Optional[int],
    ) -> None:
        if conn.raw_tokens is not None and conn.raw_tokens > 0:
            conn.raw_tokens -= 1
            if conn.raw_tokens == 0:
                conn.raw_tokens = None
        if damaged_at is not None:
            self._problem(
                ProblemKind.INCOMPLETE_FRAME,
                f"SASL token of {len(frame) - 4} bytes, {len(frame) - damaged_at} not captured",
                conn,
                d,
                offset,
                packet,
                ts,
            )
        self.stats.sasl_tokens += 1
        conn.token_step += 1
        assert conn.client_dir is not None
        cid = conn.cid
        conn.tokens.append(
            SaslToken(
                cid,
                cid.source(conn.client_dir),
                cid.destination(conn.client_dir),
                conn.mechanism,
                conn.token_step,
                bytes(frame[4:]),
                offset,
                packet,
                ts,
            )
        )

    def _on_token_answer(
        self,
        conn: _Conn,
        d: Direction,
        frame: bytes,
        offset: int,
        damaged_at: Optional[int],
        ts: Optional[int],
        packet: Optional[int],
    ) -> None:
        token = conn.tokens.popleft()
        if damaged_at is not None:
            self._problem(
                ProblemKind.INCOMPLETE_FRAME,
                f"SASL token answer of {len(frame) - 4} bytes, {len(frame) - damaged_at} not captured",
                conn,
                d,
                offset,
                packet,
                ts,
            )
        token.response_token = bytes(frame[4:])
        token.response_offset, token.response_packet, token.response_time_ns = offset, packet, ts
        if self.sasl_records:
            self._out.append(token)

    def _token_unanswered(self, conn: _Conn, token: SaslToken, why: str) -> None:
        if self.sasl_records:
            self._out.append(token)
        self._problem(
            ProblemKind.UNANSWERED_REQUEST,
            f"no answer to SASL {token.mechanism} token {token.step}: {why}",
            conn,
            conn.client_dir,
            token.request_offset,
            token.request_packet,
            token.request_time_ns,
        )

    def _on_request(
        self,
        conn: _Conn,
        d: Direction,
        frame: bytes,
        offset: int,
        damaged_at: Optional[int],
        ts: Optional[int],
        packet: Optional[int],
    ) -> None:
        header: Any = None
        msg: Any = None
        error: Optional[KprotoError] = None
        if damaged_at is not None:
            missing = len(frame) - damaged_at
            error = DecodeError(f"{missing} bytes of the frame are missing from the capture", damaged_at)
            if conn.kafka is None:
                self._reject(conn)
                return
            self._problem(
                ProblemKind.INCOMPLETE_FRAME,
                f"request frame of {len(frame)} bytes, {missing} not captured",
                conn,
                d,
                offset,
                packet,
                ts,
                frame,
            )
            if damaged_at < 12:
                return  # not even the header survived: nothing to pair a response with
            _size, api_key, version, corr = REQUEST_HEAD.unpack_from(frame, 0)
        else:
            try:
                header, msg = kproto.decode_request(frame)
            except KprotoError as exc:
                error = exc
                try:
                    header, _ = decode_request_header(frame)
                except KprotoError:
                    header = None
                # A client newer than kproto opens with ApiVersions in a version kproto does not know:
                # still Kafka, and its problem waits for the answer (see _on_response).
                newer = header is not None and _newer_api_versions(header, exc)
                if conn.kafka is None and not newer:
                    self._reject(conn)
                    return
                held = (_classify(exc), f"request: {exc}", conn, d, offset, packet, ts, frame)
                if not newer:
                    self._problem(*held)
                if header is None:
                    return
            if conn.kafka is None:
                conn.kafka = True
                self.stats.kafka_connections += 1
            api_key, version, corr = header.api_key, header.api_version, header.correlation_id
        self.stats.requests += 1
        pending = _Pending(api_key, version, corr, header, msg, error, len(frame), offset, packet, ts)
        if error is not None and header is not None and _newer_api_versions(header, error):
            pending.held_problem = held
        if header is not None and msg is not None and not expects_response(header, msg):
            self._emit_exchange(conn, pending, expects_response=False)
            return
        conn.pending.append(pending)
        if len(conn.pending) > self.max_outstanding:
            self._unanswered(conn, conn.pending.popleft(), f"more than {self.max_outstanding} requests outstanding")

    def _on_response(
        self,
        conn: _Conn,
        d: Direction,
        frame: bytes,
        offset: int,
        damaged_at: Optional[int],
        ts: Optional[int],
        packet: Optional[int],
    ) -> None:
        self.stats.responses += 1
        if damaged_at is not None and damaged_at < 8:
            self._problem(
                ProblemKind.INCOMPLETE_FRAME,
                f"response frame of {len(frame)} bytes whose correlation id was not captured",
                conn,
                d,
                offset,
                packet,
                ts,
                frame,
            )
            return
        corr = _I32.unpack_from(frame, 4)[0]
        match = None
        for i, p in enumerate(conn.pending):
            if p.correlation_id == corr:
                match = i
                break
        if match is None:
            self._problem(
                ProblemKind.RESPONSE_WITHOUT_REQUEST,
                f"response with correlation id {corr} ({len(frame)} bytes) answers no request seen",
                conn,
                d,
                offset,
                packet,
                ts,
                frame,
            )
            return
        for _ in range(match):
            self._unanswered(
                conn, conn.pending.popleft(), f"a later request (correlation id {corr}) was answered first"
            )
        req = conn.pending.popleft()
        header: Any = None
        msg: Any = None
        error: Optional[KprotoError] = None
        response_version: Optional[int] = None
        if damaged_at is not None:
            missing = len(frame) - damaged_at
            error = DecodeError(f"{missing} bytes of the frame are missing from the capture", damaged_at)
            self._problem(
                ProblemKind.INCOMPLETE_FRAME,
                f"response frame of {len(frame)} bytes, {missing} not captured",
                conn,
                d,
                offset,
                packet,
                ts,
                frame,
            )
        elif req.held_problem is not None and _v0_refusal(frame):
            # The server refused the client's ApiVersions version in the v0 layout, as Kafka does: it did
            # not read the request either, so nothing is missing; the client retries in a version both know.
            req.held_problem = None
            header, msg = kproto.decode_response(frame, _API_VERSIONS, 0)
            response_version = 0
        else:
            try:
                header, msg = kproto.decode_response(frame, req.api_key, req.version)
            except KprotoError as exc:
                error = exc
                self._problem(
                    _classify(exc),
                    f"response to api key {req.api_key} v{req.version}: {exc}",
                    conn,
                    d,
                    offset,
                    packet,
                    ts,
                    frame,
                )
        if req.held_problem is not None:
            self._problem(*req.held_problem)
        ex = self._emit_exchange(conn, req, expects_response=True)
        ex.response_version = response_version
        if req.api_key == _SASL_HANDSHAKE and msg is not None and msg.error_code == 0 and req.message is not None:
            conn.mechanism = req.message.mechanism
            if req.version == 0:  # the mechanism's tokens follow raw (see module docs)
                count = raw_token_count(conn.mechanism)
                conn.raw_tokens = -1 if count is None else count
        ex.response_header = header
        ex.response = msg
        ex.response_error = error
        ex.response_size = len(frame)
        ex.response_offset = offset
        ex.response_packet = packet
        ex.response_time_ns = ts

    # --- output -----------------------------------------------------------------------------------------

    def _emit_exchange(self, conn: _Conn, req: _Pending, expects_response: bool) -> Exchange:
        assert conn.client_dir is not None
        cid = conn.cid
        ex = Exchange(
            connection=cid,
            client=cid.source(conn.client_dir),
            server=cid.destination(conn.client_dir),
            api_key=req.api_key,
            api_version=req.version,
            correlation_id=req.correlation_id,
            request_header=req.header,
            request=req.message,
            request_error=req.error,
            request_size=req.size,
            request_offset=req.offset,
            request_packet=req.packet,
            request_time_ns=req.ts,
            expects_response=expects_response,
            sasl_mechanism=conn.mechanism if req.api_key == _SASL_AUTHENTICATE else None,
        )
        self.stats.exchanges += 1
        self._out.append(ex)
        return ex

    def _unanswered(self, conn: _Conn, req: _Pending, why: str) -> None:
        assert conn.client_dir is not None
        if req.held_problem is not None:
            self._problem(*req.held_problem)
        self._emit_exchange(conn, req, expects_response=True)
        self._problem(
            ProblemKind.UNANSWERED_REQUEST,
            f"no response to api key {req.api_key} v{req.version} correlation id {req.correlation_id}: {why}",
            conn,
            conn.client_dir,
            req.offset,
            req.packet,
            req.ts,
        )

    def _problem(
        self,
        kind: ProblemKind,
        detail: str,
        conn: Optional[_Conn],
        d: Optional[Direction],
        offset: Optional[int],
        packet: Optional[int],
        ts: Optional[int],
        frame: Optional[bytes] = None,
    ) -> None:
        counts = self.stats.problems
        counts[kind.value] = counts.get(kind.value, 0) + 1
        self._out.append(Problem(kind, detail, conn.cid if conn is not None else None, d, offset, packet, ts, frame))


def decode_capture(
    source: CaptureSource,
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
    max_outstanding: int = 1024,
    max_open_connections: int = DEFAULT_MAX_OPEN_CONNECTIONS,
    sasl_records: bool = False,
) -> Iterator[Record]:
    """Read a pcap/pcapng capture (path, bytes or binary file object) and yield its Kafka
    :class:`Exchange` and :class:`Problem` records in capture order.

    ``max_record_bytes`` bounds one capture record, ``max_buffered_bytes`` the out-of-order TCP data held
    per direction, ``max_frame_size`` one Kafka frame, ``max_outstanding`` the requests awaiting an answer
    per connection, ``max_open_connections`` the connections followed at once; ``sasl_records`` adds
    :class:`SaslToken` records for raw SASL tokens.
    """
    conversations = KafkaConversations(
        ports=ports,
        detect=detect,
        max_frame_size=max_frame_size,
        max_outstanding=max_outstanding,
        sasl_records=sasl_records,
    )
    reassembler = TcpReassembler(max_buffered_bytes=max_buffered_bytes, max_open_connections=max_open_connections)
    for item in CaptureReader(source, max_record_bytes=max_record_bytes):
        if type(item) is CaptureDiagnostic:
            conversations.add_capture_diagnostic(item)
        else:
            reassembler.feed(item)  # type: ignore[arg-type]
            for event in reassembler.events():
                conversations.feed(event)
        if conversations._out:
            yield from conversations.records()
    reassembler.finish()
    for event in reassembler.events():
        conversations.feed(event)
    conversations.finish()
    yield from conversations.records()
