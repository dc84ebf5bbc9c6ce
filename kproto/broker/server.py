"""The mock broker's network side: asyncio streams around :class:`~kproto.connection.ServerConnection`.

Each accepted connection runs two tasks.  The *reader* feeds socket bytes to the sans-I/O connection
and queues the requests it yields (at most ``max_queued_requests`` ahead, so a client that pipelines
without reading cannot grow memory).  The *processor* handles them one at a time, in order, as a 0.9
broker does (it mutes a connection while one of its requests is in progress), applies injected faults,
and writes each response.  When either side ends -- the client closes, a frame is too large or does
not decode, a fault drops the connection, a handler fails -- both tasks stop and the socket is closed;
the broker itself stays up.

Budgets (:class:`~kproto.broker.config.BrokerConfig`, docs/reliability.md) keep one client from
starving the others:

* memory: every request's bytes count against one :class:`~kproto.broker.memory_budget.ByteBudget`
  from its first byte until it has been handled; a reader that cannot reserve its request stops
  reading (TCP pushes back on the client) instead of buffering;
* connections: past ``max_connections`` a new connection is closed at once, and the event loop's
  "accept() out of system resource" reports (EMFILE) are summarised once per interval instead of a
  traceback per attempt;
* time: a connection idle for ``connections_max_idle_ms`` is closed, and so is one that started a
  request and did not finish sending it within ``request_receive_timeout_ms`` (slowloris).

Requests that do not decode close the connection after the earlier ones are answered, with the reason
logged (INFO, logger ``kproto.broker``) -- except an ApiVersions request in a version the broker cannot
read, which is answered in the v0 layout with UNSUPPORTED_VERSION and the served ranges, as Kafka does
so that a newer client can retry in a version both sides know.  SASL (:mod:`kproto.broker.sasl`) is a
per-connection stage checked before a request reaches the handlers; after a v0 handshake the next
frame is a bare token, read here with a frame reader of its own.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any, Dict, Iterable, Optional, Set, SupportsIndex, Tuple

from kproto.apis import APIS
from kproto.broker.config import BrokerConfig
from kproto.broker.served_versions import api_versions_fallback
from kproto.broker.faults import FaultPlan, error_response
from kproto.broker.cluster import serving_node
from kproto.broker.core import BrokerCore
from kproto.broker.hooks import Intercept, InterceptedRequest, RequestHooks
from kproto.broker.memory_budget import ByteBudget
from kproto.broker.recording import ConnectionRecording, TrafficRecorder
from kproto.broker.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslSession, SaslStage
from kproto.connection.server import BadRequest, ClientClosed, RequestReceived, ServerConnection
from kproto.errors import KprotoError
from kproto.framing import FrameReader, encode_response
from kproto.message_base import Message

__all__ = ["BrokerServer", "RateLimitedLog"]

log = logging.getLogger("kproto.broker")

_READ_SIZE = 256 * 1024
_STREAM_LIMIT = 64 * 1024  # asyncio's default: the reader pauses the socket past twice this much buffered
_DROP = object()  # what _answer returns to have the connection closed
_SILENCE = object()  # what _answer returns to leave the request, and every later one, unanswered
_ACCEPT_FAILURE = "socket.accept() out of system resource"
_MAX_API_KEY = 127  # api keys above the highest known one are refused by the decoder anyway
_API_VERSIONS = 18


class _RawToken:
    """A bare SASL token frame (after a v0 SaslHandshake), queued like a request to keep the order."""

    __slots__ = ("token",)

    def __init__(self, token: bytes) -> None:
        self.token = token


def _version_fallback(event: BadRequest) -> bool:
    """Whether a bad request is an ApiVersions in a version the broker cannot read (answered in v0)."""
    header = event.header
    return (
        header is not None
        and header.api_key == _API_VERSIONS
        and header.api_version not in APIS[_API_VERSIONS].versions
    )


class _StampedReader(asyncio.StreamReader):
    """A stream reader that notes when bytes last came in from the socket.

    Injected delays count from a request's arrival.  The event loop hands bytes to the reader as soon
    as the socket has them, but the connection's reader task takes them only at its next turn -- after
    whatever the processor is doing -- so the time it reads them is late by that much; the time they
    were fed is when the broker got them.
    """

    fed_at = 0.0

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        self.fed_at = time.monotonic()
        super().feed_data(data)


class _ReadInto(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """asyncio's stream protocol, reading the socket into one buffer the broker keeps.

    A plain protocol gets a new bytes object from every ``recv(256 KiB)``, shrunk to what was read: the
    allocator hands out and takes back a quarter megabyte per read, and when it gives that memory back
    to the system the next read faults it in again (in a small process on a 2-core VM, 150 us per
    read against 15 us for a read into a kept buffer).  As a buffered protocol, the transport reads
    into ``buffer`` and the bytes read are copied out at once, so one buffer serves every connection
    of the broker (reads run one at a time, on the loop's thread).
    """

    def __init__(
        self, buffer: memoryview, reader: asyncio.StreamReader, connected: Any, loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(reader, connected, loop=loop)
        self._buffer = buffer

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self._buffer[:nbytes]))


def _stop_reading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """End the stream for the connection's reader: a pending read returns b"" at once.  The transport
    stops reading first, so no bytes can follow the end."""
    transport = writer.transport
    if isinstance(transport, asyncio.ReadTransport):
        transport.pause_reading()
    reader.feed_eof()


class RateLimitedLog:
    """Log a recurring condition at most once per ``interval`` seconds, with how often it recurred.

    A broker at its file-descriptor limit fails every accept() and asyncio reports each failure with
    a traceback: megabytes of log per second and most of a core.  One line per interval says the same.
    """

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self.occurrences = 0
        self.lines = 0
        self._last: Dict[str, float] = {}
        self._suppressed: Dict[str, int] = {}

    def __call__(self, key: str, message: str) -> None:
        self.occurrences += 1
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        suppressed = self._suppressed.pop(key, 0)
        self._last[key] = now
        self.lines += 1
        more = f" ({suppressed} more since the last report)" if suppressed else ""
        log.warning("%s%s", message, more)


class _Connection:
    """What the server tracks of one client connection besides its sans-I/O state."""

    __slots__ = (
        "conn",
        "reserved",
        "last_activity",
        "partial_since",
        "sasl",
        "raw_frames",
        "reading",
        "timed_out",
        "timer",
    )

    def __init__(self, conn: ServerConnection, sasl: SaslSession) -> None:
        self.conn = conn
        self.reserved = 0  # bytes of the budget held for the request being received
        self.last_activity = time.monotonic()
        self.partial_since: Optional[float] = None  # when the request being received started arriving
        self.sasl = sasl
        self.raw_frames: Optional[FrameReader] = None  # reads the bare token after a v0 SASL handshake
        self.reading = False  # waiting for bytes: the only time the idle and receive timers apply
        self.timed_out = False
        self.timer: Optional[asyncio.TimerHandle] = None


class BrokerServer:
    """Listens on ``host:port`` (0: any free port) and serves :class:`BrokerCore` to every client."""

    def __init__(
        self,
        core: BrokerCore,
        faults: FaultPlan,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        recorder: Optional[TrafficRecorder] = None,
        node_id: Optional[int] = None,
        hooks: Optional[RequestHooks] = None,
        run_timers: bool = True,
        summarise_accept_failures: bool = True,
    ) -> None:
        self.core = core
        self.faults = faults
        #: The cluster node this listener is (the first one unless told).
        self.node_id = core.config.node_id if node_id is None else node_id
        self.hooks = hooks if hooks is not None else RequestHooks()
        self._run_timers = run_timers
        self._summarise = summarise_accept_failures
        self.config: BrokerConfig = core.config
        self.recorder = recorder
        self._host, self._port = host, port
        self._server: Optional[asyncio.AbstractServer] = None
        self._tasks: Set[asyncio.Task] = set()
        self._writers: Set[asyncio.StreamWriter] = set()
        self._stopping = False
        self.connections_accepted = 0
        #: Connections closed at once because ``max_connections`` were open.
        self.connections_refused = 0
        #: Connections closed by the idle or request-receive timers.
        self.connections_timed_out = 0
        self.budget = ByteBudget(self.config.max_buffered_bytes)
        # Produce carries record bytes, kept as they are; every other request is decoded into objects.
        self._request_limits = {key: self.config.max_request_bytes for key in range(_MAX_API_KEY + 1) if key != 0}
        self.rate_limited_log = RateLimitedLog()
        self._previous_handler: Any = None
        self._idle_s = self.config.connections_max_idle_ms / 1000.0
        self._receive_s = self.config.request_receive_timeout_ms / 1000.0

    @property
    def address(self) -> Tuple[str, int]:
        """The (host, port) actually listened on."""
        if self._server is None:
            raise RuntimeError("the broker is not started")
        server: Any = self._server  # an asyncio.Server (AbstractServer does not declare its sockets)
        sockname = server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._summarise:
            self._previous_handler = loop.get_exception_handler()
            loop.set_exception_handler(self._loop_exception)
        read_buffer = memoryview(bytearray(_READ_SIZE))  # shared: each read is copied out of it at once

        def protocol() -> asyncio.StreamReaderProtocol:  # what asyncio.start_server builds, but see _ReadInto
            return _ReadInto(read_buffer, _StampedReader(limit=_STREAM_LIMIT, loop=loop), self._accept, loop=loop)

        self._server = await loop.create_server(protocol, self._host, self._port, reuse_address=True)
        self.core.bind(*self.address, node_id=self.node_id)
        if self._run_timers:
            self._track(asyncio.ensure_future(self.core.run_timers()))

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
        """Summarise accept() failures (EMFILE and kin); pass everything else to the previous handler."""
        if context.get("message") == _ACCEPT_FAILURE:
            exc = context.get("exception")
            self.rate_limited_log("accept", f"mock broker cannot accept connections: {exc}")
            return
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    async def stop(self) -> None:
        """Stop listening and end every connection."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        # A connection accepted just before close() may only now reach _accept, hence the loop.
        while self._tasks or self._writers:
            for writer in list(self._writers):
                writer.transport.abort()  # each connection's reader sees the end and winds down on its own
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await asyncio.sleep(0)
        if self._server is not None:
            await self._server.wait_closed()
        if self._summarise:
            asyncio.get_running_loop().set_exception_handler(self._previous_handler)

    def _track(self, task: asyncio.Task) -> asyncio.Task:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.transport.abort()
            return
        if len(self._writers) >= self.config.max_connections:
            self.connections_refused += 1
            self.rate_limited_log(
                "connections",
                f"mock broker refuses connections: {len(self._writers)} open "
                f"(max_connections {self.config.max_connections})",
            )
            writer.transport.abort()
            return
        self.connections_accepted += 1
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # the broker is stopping; asyncio's stream callback must not see a cancelled task
        except Exception:  # noqa: BLE001 - a decoder or handler bug ends one connection, never the broker
            log.exception("mock broker connection failed; closing it")
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        current = asyncio.current_task()
        if current is not None:
            self._track(current)
        peer = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        local = writer.get_extra_info("sockname") or ("0.0.0.0", 0)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        recording = self.recorder.connection(peer[:2], local[:2]) if self.recorder else None
        client = _Connection(
            ServerConnection(
                max_frame_size=self.config.max_frame_size,
                broker_quirks=self.config.broker_quirks,
                max_request_size=self._request_limits,
            ),
            SaslSession(self.config.sasl_plain_users),
        )
        queue: asyncio.Queue = asyncio.Queue(self.config.max_queued_requests)
        processor = self._track(
            asyncio.ensure_future(self._process(client, queue, writer, "/" + str(peer[0]), recording))
        )
        # Once the processor ends nobody answers: a pending read returns at once instead of waiting.
        processor.add_done_callback(lambda _: _stop_reading(reader, writer))
        self._watch(client, queue, reader, writer)
        finish_queue = False
        try:
            finish_queue = await self._read(client, queue, reader, recording, processor)
        except (ConnectionError, OSError, KprotoError) as exc:
            log.debug("connection from %s ends: %s", peer, exc)
        finally:
            if client.timer is not None:
                client.timer.cancel()
            if not finish_queue:
                processor.cancel()  # the client is gone or broke the framing: nobody reads answers
            try:
                await processor
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - a connection never takes the broker down
                pass
            writer.close()
            self._release_reservation(client)
            while not queue.empty():  # requests never handled give their bytes back
                _, size, _ = queue.get_nowait()
                self.budget.release(size)
            if recording is not None:
                recording.close()

    async def _read(
        self,
        client: _Connection,
        queue: asyncio.Queue,
        reader: asyncio.StreamReader,
        recording: Optional[ConnectionRecording],
        processor: asyncio.Task,
    ) -> bool:
        """Queue requests until the stream ends; True when the processor should finish the queue first
        (a bad request: earlier requests are answered, then the connection closes)."""
        conn = client.conn
        while not processor.done():
            if client.reserved == 0 and self.budget.exhausted:
                await self._wait_or_processor(self.budget.wait_for_room(), processor)
            data = await self._read_chunk(client, queue, reader)
            if data is None:
                return False
            client.last_activity = time.monotonic()
            # Every request these bytes complete had arrived when the last of them was fed to the reader.
            arrived = reader.fed_at if isinstance(reader, _StampedReader) else client.last_activity
            if recording is not None:
                recording.from_client(data)
            if client.sasl.stage is SaslStage.RAW_TOKEN:
                token = self._raw_token(client, data)
                if token is not None and not await self._enqueue(queue, (token, 0, arrived), processor):
                    return False
                continue
            buffered_before = conn.buffered
            events = conn.receive_data(data)
            # Bytes of completed requests: what this read finished of the reserved request, plus whole
            # requests that arrived in it unannounced.  Each queued request carries its share.
            for event in events:
                if isinstance(event, ClientClosed):
                    return False
                size = self._request_bytes(client, event)
                if not await self._enqueue(queue, (event, size, arrived), processor):
                    self.budget.release(size)
                    return False
                if isinstance(event, BadRequest) and not _version_fallback(event):
                    return True
            if events or buffered_before == 0:  # the request being received (if any) started in this read
                client.partial_since = arrived if conn.buffered else None
            pending = conn.pending_frame_size
            if pending is not None and client.reserved == 0:
                if not 4 <= pending <= 4 + self.config.max_frame_size:
                    # The connection has already failed on this size prefix; reserving for it would
                    # only hold up everybody else until its next read.
                    raise ConnectionError(f"request frame of {pending - 4} bytes is outside the limit")
                # A request has started: hold its whole declared size before reading more of it.  Its
                # receive timer starts once the memory is granted.
                await self._wait_or_processor(self.budget.reserve(pending), processor)
                client.reserved = pending
                client.partial_since = time.monotonic()
        return False

    def _raw_token(self, client: _Connection, data: bytes) -> Optional[_RawToken]:
        """Bytes of the bare token after a v0 SASL handshake: the token once its frame is complete."""
        if client.raw_frames is None:
            client.raw_frames = FrameReader(self.config.max_sasl_token_bytes)
        frames = client.raw_frames.feed(data)  # a size prefix over the limit raises LimitExceededError
        if not frames:
            return None
        if len(frames) > 1 or client.raw_frames.buffered:
            raise ConnectionError("bytes after the SASL token, before the broker answered it")
        client.raw_frames = None
        client.sasl.stage = SaslStage.RAW_TOKEN_RECEIVED  # later bytes are requests again
        return _RawToken(bytes(frames[0][4:]))

    def _request_bytes(self, client: _Connection, event: object) -> int:
        """The budget bytes a completed request takes with it into the queue."""
        if isinstance(event, RequestReceived):
            size = event.frame_size
        else:
            size = len(event.frame) if isinstance(event, BadRequest) else 0
        if client.reserved:
            taken, client.reserved = client.reserved, 0
            if size > taken:
                self.budget.charge(size - taken)
                taken = size
            return taken
        self.budget.charge(size)
        return size

    def _release_reservation(self, client: _Connection) -> None:
        if client.reserved:
            self.budget.release(client.reserved)
            client.reserved = 0

    @staticmethod
    async def _wait_or_processor(waiting: Any, processor: asyncio.Task) -> None:
        """Await ``waiting`` unless the processor ends first (a granted reservation is then given back
        by :meth:`ByteBudget.reserve` itself, on cancellation)."""
        task = asyncio.ensure_future(waiting)
        await asyncio.wait({task, processor}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        raise ConnectionError("connection ended while waiting for the byte budget")

    async def _read_chunk(
        self, client: _Connection, queue: "asyncio.Queue[Any]", reader: asyncio.StreamReader
    ) -> Optional[bytes]:
        """The next bytes from the socket, b"" at its end (or once the processor ended), or None when a
        timer closed the connection."""
        if client.timed_out or self._timed_out(client, queue):
            return None
        client.reading = True
        try:
            data = await reader.read(_READ_SIZE)
        finally:
            client.reading = False
        return None if client.timed_out else data

    def _timed_out(self, client: _Connection, queue: "asyncio.Queue[Any]") -> bool:
        """Whether the connection's request-receive timer (a request started arriving) or idle timer
        has run out; a connection whose request is still being handled is not idle.  Counted once."""
        now = time.monotonic()
        if client.partial_since is not None:
            if now < client.partial_since + self._receive_s:
                return False
            why = "request not received in time"
        else:
            if now < client.last_activity + self._idle_s:
                return False
            if not queue.empty() or client.conn.owed > 0:
                client.last_activity = now  # a request is being handled: not idle
                return False
            why = "idle"
        self.connections_timed_out += 1
        log.debug("closing a connection: %s", why)
        client.timed_out = True
        return True

    def _watch(
        self,
        client: _Connection,
        queue: "asyncio.Queue[Any]",
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """The connection's timers, checked while it waits for bytes.

        One timer per connection, re-armed each time it fires, rather than a timeout on every read
        (which cost a task and a timer handle per read).  Deadlines only move later, so a check
        ``min(idle, receive)`` after the previous one is never late; between reads (the byte budget
        or a full queue holds the reader) the timers do not apply, and the next read checks them
        first.  A connection that timed out stops reading: its pending read returns at once.
        """
        if client.reading and self._timed_out(client, queue):
            _stop_reading(reader, writer)
            return
        now = time.monotonic()
        deadline = (
            client.partial_since + self._receive_s
            if client.partial_since is not None
            else client.last_activity + self._idle_s
        )
        wait = deadline - now if deadline > now else min(self._idle_s, self._receive_s)
        client.timer = asyncio.get_running_loop().call_later(wait, self._watch, client, queue, reader, writer)

    @staticmethod
    async def _enqueue(queue: asyncio.Queue, event: object, processor: asyncio.Task) -> bool:
        """Queue ``event``, waiting for room unless the processor ends first; False if it did."""
        if not queue.full():
            queue.put_nowait(event)
            return True
        put = asyncio.ensure_future(queue.put(event))
        await asyncio.wait({put, processor}, return_when=asyncio.FIRST_COMPLETED)
        if put.done():
            return True
        put.cancel()
        return False

    async def _process(
        self,
        client: _Connection,
        queue: asyncio.Queue,
        writer: asyncio.StreamWriter,
        client_host: str,
        recording: Optional[ConnectionRecording],
    ) -> None:
        serving_node.set(self.node_id)  # this task's context: the handlers answer as this node
        try:
            while True:
                event, size, arrived = await queue.get()
                try:
                    if isinstance(event, BadRequest):
                        if not _version_fallback(event):
                            log.info("closing a connection from %s after a bad request: %s", client_host, event.error)
                            return
                        assert event.header is not None
                        frame: object = encode_response(
                            api_versions_fallback(self.core.served), 0, event.header.correlation_id
                        )
                    elif isinstance(event, _RawToken):
                        frame = self._check_raw_token(client, event, client_host)
                    else:
                        frame = await self._answer(client, event, client_host, arrived)
                finally:
                    self.budget.release(size)  # handled (or abandoned): its bytes are free again
                if frame is _DROP:
                    return
                if frame is _SILENCE:
                    await asyncio.Event().wait()  # until the client closes or the broker stops
                if frame:
                    if recording is not None:
                        recording.from_server(frame)  # type: ignore[arg-type]
                    writer.write(frame)  # type: ignore[arg-type]
                    await writer.drain()
                    client.last_activity = time.monotonic()
                if client.sasl.close_after_answer:
                    log.info("closing a connection from %s: SASL authentication failed", client_host)
                    return
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError, KprotoError) as exc:
            log.debug("connection closed: %s", exc)
        except Exception:  # noqa: BLE001 - a bug in a handler closes one connection, not the broker
            log.exception("mock broker handler failed; closing the connection")
        finally:
            writer.close()

    def _hooked(self, request: RequestReceived) -> Optional[Intercept]:
        info = APIS[request.api_key]
        return self.hooks.run(
            InterceptedRequest(
                node_id=self.node_id,
                api_key=request.api_key,
                api_name=info.name,
                api_version=request.api_version,
                request=request.message,
                client_id=request.header.client_id,
                correlation_id=request.header.correlation_id,
            )
        )

    @staticmethod
    def _check_raw_token(client: _Connection, event: _RawToken, client_host: str) -> object:
        user, why = client.sasl.raw_token(event.token)
        if user is None:
            log.info("closing a connection from %s: %s", client_host, why)
            return _DROP
        return b"\0\0\0\0"  # PLAIN's server token is empty

    async def _answer(self, client: _Connection, request: RequestReceived, client_host: str, arrived: float) -> object:
        """The response frame for ``request``, b"" when none is due, or _DROP to close the connection."""
        sasl = client.sasl
        if not sasl.allows(request.api_key):
            log.info(
                "closing a connection from %s: api key %d before SASL authentication (%s)",
                client_host,
                request.api_key,
                sasl.stage.value,
            )
            return _DROP
        hooked = self._hooked(request) if self.hooks else None
        fault = self.faults.take(request.api_key, request.message, request.api_version) if hooked is None else None
        delay = max(
            self.hooks.latency.get(self.node_id, 0.0),
            fault.delay if fault is not None else 0.0,
            hooked.delay if hooked is not None else 0.0,
        )
        if delay > 0:
            await asyncio.sleep(max(arrived + delay - time.monotonic(), 0.0))
        if hooked is not None:
            if hooked.drop:
                return _SILENCE
            code = hooked.code
            if hooked.close or (code is not None and not request.expects_response):
                return _DROP
            if code is not None:
                refusal = error_response(request.api_key, request.message, code, request.api_version)
                return client.conn.send_response(request, refusal)
            if hooked.response is not None:
                if not request.expects_response:
                    return b""
                return client.conn.send_response(request, hooked.response)
        if fault is not None and (fault.drop or (fault.error is not None and not request.expects_response)):
            return _DROP  # an acks=0 Produce that fails closes the connection, as in 0.9
        response: Optional[Message]
        if fault is not None and fault.error is not None:
            response = error_response(request.api_key, request.message, fault.error, request.api_version)
        elif request.api_key == SASL_HANDSHAKE:
            handshake: Any = request.message
            response = sasl.handshake(handshake.mechanism, request.api_version)
        elif request.api_key == SASL_AUTHENTICATE:
            authenticate: Any = request.message
            response = sasl.authenticate(bytes(authenticate.auth_bytes))
        else:
            response = await self.core.handle(request, client_host)
        if not request.expects_response:
            return b""
        assert response is not None, "a request that expects a response was given none"
        return client.conn.send_response(request, response)
