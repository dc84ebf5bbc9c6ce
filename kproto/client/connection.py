"""An awaitable Kafka connection: asyncio streams around the sans-I/O :class:`~kproto.connection.ClientConnection`.

Why this module exists: every asyncio user of :class:`~kproto.connection.ClientConnection` needs the same
glue -- a task that reads the socket and feeds the sans-I/O connection, a future per request resolved
when its response is decoded, waiting (not failing) when ``max_in_flight`` requests are already out, and
the choice of one version per API.  Framing, correlation ids and pairing stay in
:mod:`kproto.connection`; this module only moves bytes and resolves futures.

Versions: :meth:`Connection.open` asks the broker with ApiVersions (v0, which every broker from 0.10.0 to
4.x answers) unless ``broker_release`` names the broker's release line (or gives its version ranges), which is how
a 0.8/0.9 broker (it closes the connection on an ApiVersions request) is described.  Either way the result goes through
:func:`kproto.versions.negotiate` against :data:`CLIENT_VERSIONS`, the versions the client layer fills
correctly, and :meth:`Connection.version` answers per API.

``await conn.request(msg)`` returns the decoded response message; a Produce with ``acks=0`` has none and
must go through :meth:`Connection.send_one_way`, which returns once the frame is written.

Bounds: opening waits at most ``connect_timeout`` for the TCP handshake, then ``request_timeout`` for the
ApiVersions answer.  Every request waits at most ``request_timeout`` (or the ``timeout`` given to that
call) for its answer; when that passes the connection is closed -- the broker answers in order, so a
missing answer leaves every later one in doubt -- and this request and every other one waiting on the
connection fail with :class:`RequestTimeoutError`.  That is how a frozen broker (a stopped process whose
kernel still accepts connections) or a listener that never answers is noticed.
"""

from __future__ import annotations

import asyncio
from typing import Dict, List, Mapping, Optional, Tuple, Union

from kproto.apis import APIS
from kproto.connection import ClientConnection, ConnectionClosed, Response
from kproto.errors import KprotoError, ProtocolError
from kproto.framing import DEFAULT_MAX_FRAME_SIZE
from kproto.message_base import Message
from kproto.messages import ApiVersionsRequest
from kproto.versions import VersionRanges, negotiate

__all__ = [
    "CLIENT_VERSIONS",
    "BrokerConnectionError",
    "BrokerVersions",
    "ClientTimeoutError",
    "Connection",
    "RequestTimeoutError",
]

#: How a broker that cannot answer ApiVersions is described: its release line (``"0.9.0"``), or its version
#: ranges per api key.
BrokerVersions = Union[str, VersionRanges]

#: The versions of each API the client layer knows how to fill and read.  The upper bounds stop where a
#: version changes meaning the client does not implement: Produce/Fetch v13 address topics by id, Metadata
#: v13 moved errors, OffsetFetch v8 batches groups.  Group APIs follow :mod:`kproto.group.member`.
CLIENT_VERSIONS: Mapping[int, Tuple[int, int]] = {
    0: (0, 12),  # Produce
    1: (0, 12),  # Fetch
    2: (0, 7),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (0, 9),  # OffsetCommit (v9: member epochs of KIP-848 groups)
    9: (0, 7),  # OffsetFetch
    10: (0, 4),  # FindCoordinator (GroupCoordinator)
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    18: (0, 4),  # ApiVersions
    22: (0, 4),  # InitProducerId
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; v1: the member id is the client's)
}

_READ_SIZE = 256 * 1024


#: Kafka's ``request.timeout.ms`` default, the bound of every request of the client layer.
DEFAULT_REQUEST_TIMEOUT_MS = 30000


class BrokerConnectionError(KprotoError, ConnectionError):
    """The connection to a broker failed or closed; requests still waiting on it get this error."""


class ClientTimeoutError(KprotoError):
    """A client call's documented bound passed before it could finish (the message names the bound).

    Not a :class:`TimeoutError` on purpose: ``asyncio.TimeoutError`` is that class from Python 3.11, so a
    caller's own ``asyncio.wait_for`` around a send future could not tell its own timeout from this one."""


class RequestTimeoutError(BrokerConnectionError, ClientTimeoutError):
    """No answer within the request timeout: the connection was closed, and every request waiting on it
    failed with this error (a :class:`BrokerConnectionError`, so callers that retry lost connections retry
    these too)."""


class Connection:
    """One connection to one broker; build it with :meth:`open`.

    ``max_in_flight`` bounds the requests awaiting responses: :meth:`request` waits for room instead of
    raising.  Requests are written in the order :meth:`request` is called and answered in that order.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str,
        max_in_flight: int,
        max_frame_size: int,
        address: str = "",
        request_timeout: Optional[float] = DEFAULT_REQUEST_TIMEOUT_MS / 1000.0,
    ) -> None:
        self.address = address
        #: seconds a request waits for its answer (None: no bound)
        self.request_timeout = request_timeout
        self._reader = reader
        self._writer = writer
        self._conn = ClientConnection(client_id=client_id, max_in_flight=None, max_frame_size=max_frame_size)
        self.max_in_flight = max_in_flight
        self._room = asyncio.Semaphore(max_in_flight)
        self._waiting: Dict[int, "asyncio.Future[Message]"] = {}
        self._error: Optional[BaseException] = None
        self.versions: Dict[int, int] = {}
        self._read_task = asyncio.ensure_future(self._read_loop())

    # ---------------------------------------------------------------- opening

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "kproto",
        broker_release: Optional[BrokerVersions] = None,
        max_in_flight: int = 5,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        connect_timeout: float = 10.0,
        request_timeout: Optional[float] = DEFAULT_REQUEST_TIMEOUT_MS / 1000.0,
    ) -> "Connection":
        """Connect and settle the version of every API (see the module docstring).

        Fails with :class:`BrokerConnectionError` when the TCP handshake does not finish within
        ``connect_timeout`` seconds or is refused, and with :class:`RequestTimeoutError` when ApiVersions
        is not answered within ``request_timeout`` seconds."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout)
        except asyncio.TimeoutError as exc:
            raise BrokerConnectionError(
                f"cannot connect to {host}:{port}: no TCP handshake within {connect_timeout:g} s"
            ) from exc
        except OSError as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        conn = cls(
            reader,
            writer,
            client_id=client_id,
            max_in_flight=max_in_flight,
            max_frame_size=max_frame_size,
            address=f"{host}:{port}",
            request_timeout=request_timeout,
        )
        try:
            if broker_release is not None:
                conn.versions = negotiate(broker_release, CLIENT_VERSIONS)
            else:
                try:
                    answer = await conn.request(ApiVersionsRequest(), version=0)
                except RequestTimeoutError:
                    raise
                except BrokerConnectionError as exc:
                    raise BrokerConnectionError(
                        f"{host}:{port} closed the connection on ApiVersions: a broker older than 0.10.0 must be "
                        "named with broker_release (e.g. '0.9.0')"
                    ) from exc
                conn.versions = negotiate(answer, CLIENT_VERSIONS)  # type: ignore[arg-type]
        except BaseException:
            await conn.close()
            raise
        return conn

    # ---------------------------------------------------------------- requests

    def version(self, api_key: int) -> int:
        """The version this connection speaks for ``api_key``; :class:`ProtocolError` if none is common."""
        try:
            return self.versions[api_key]
        except KeyError:
            name = APIS[api_key].name if api_key in APIS else str(api_key)
            raise ProtocolError(f"the broker and kproto.client share no version of {name}") from None

    def supports(self, api_key: int) -> bool:
        """Whether the broker and the client share a version of ``api_key``."""
        return api_key in self.versions

    @property
    def in_flight(self) -> int:
        return self._conn.in_flight

    @property
    def closed(self) -> bool:
        return self._error is not None

    async def request(
        self, message: Message, version: Optional[int] = None, *, timeout: Optional[float] = None
    ) -> Message:
        """Send ``message`` (in ``version``, default the negotiated one) and return the decoded response.

        Waits at most ``timeout`` seconds (default :attr:`request_timeout`) from the moment the request is
        written; then the connection is closed and :class:`RequestTimeoutError` raised (module docstring)."""
        api_key = message.API_KEY
        assert api_key is not None
        if version is None:
            version = self.version(api_key)
        await self._room.acquire()
        try:
            self._check_open()
            sent = self._conn.send(message, version)
            if not sent.expects_response:
                raise ProtocolError("a Produce with acks=0 has no response: use send_one_way()")
            future: "asyncio.Future[Message]" = asyncio.get_running_loop().create_future()
            self._waiting[sent.correlation_id] = future
            self._writer.write(sent.frame)
        except BaseException:
            self._room.release()
            raise
        bound = self.request_timeout if timeout is None else timeout
        try:
            if bound is None:
                if self._writer.transport.get_write_buffer_size() > _READ_SIZE:
                    await self._drain()
                return await future
            try:
                return await asyncio.wait_for(self._answer(future), bound)
            except asyncio.TimeoutError:
                name = APIS[api_key].name if api_key in APIS else str(api_key)
                self._fail(
                    RequestTimeoutError(
                        f"{self.address or 'the broker'} did not answer {name} v{version} within {bound * 1000:.0f} ms "
                        "(request timeout): connection closed"
                    )
                )
                self._check_open()
                raise  # not reached: _check_open raised
        finally:
            self._room.release()

    async def _answer(self, future: "asyncio.Future[Message]") -> Message:
        # the write drain counts against the request timeout too: a frozen broker stops reading
        if self._writer.transport.get_write_buffer_size() > _READ_SIZE:
            await self._drain()
        return await asyncio.shield(future)

    async def send_one_way(self, message: Message, version: Optional[int] = None) -> None:
        """Write a request that gets no response (a Produce with ``acks=0``); returns once it is written."""
        api_key = message.API_KEY
        assert api_key is not None
        self._check_open()
        sent = self._conn.send(message, self.version(api_key) if version is None else version)
        if sent.expects_response:
            raise ProtocolError(f"{type(message).__name__} expects a response: use request()")
        self._writer.write(sent.frame)
        if self.request_timeout is None:
            await self._drain()
            return
        try:
            await asyncio.wait_for(self._drain(), self.request_timeout)
        except asyncio.TimeoutError:
            self._fail(
                RequestTimeoutError(
                    f"{self.address or 'the broker'} took no bytes for {self.request_timeout * 1000:.0f} ms "
                    "(request timeout): connection closed"
                )
            )
            self._check_open()

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (OSError, ConnectionError) as exc:
            self._fail(BrokerConnectionError(f"write failed: {exc}"))
            self._check_open()

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error

    # ---------------------------------------------------------------- reading

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_READ_SIZE)
                for event in self._conn.receive_data(data):
                    if isinstance(event, Response):
                        future = self._waiting.pop(event.correlation_id, None)
                        if future is not None and not future.done():
                            future.set_result(event.message)
                    elif isinstance(event, ConnectionClosed):
                        self._fail(BrokerConnectionError(f"{self.address or 'the broker'} closed the connection"))
                        return
        except asyncio.CancelledError:
            self._fail(BrokerConnectionError("the connection was closed"))
            raise
        except (OSError, ConnectionError) as exc:
            self._fail(BrokerConnectionError(f"connection to {self.address or 'the broker'} lost: {exc}"))
        except KprotoError as exc:
            # the broker broke the protocol (an oversized frame, a correlation id never sent): nothing more
            # on this connection can be trusted, so it is lost like a dropped one, and callers retry alike
            error = BrokerConnectionError(f"{self.address or 'the broker'} broke the protocol: {exc}")
            error.__cause__ = exc
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(self._error)
                future.exception()  # retrieved: a request that gave up waiting (timeout) logs no warning
        self._writer.close()

    async def close(self) -> None:
        """Close the socket; requests still waiting fail with :class:`BrokerConnectionError`."""
        self._fail(BrokerConnectionError("the connection was closed"))
        self._read_task.cancel()
        try:
            await self._read_task
        except (asyncio.CancelledError, Exception):
            pass
        try:
            # a frozen peer never takes the bytes still buffered, and the socket would wait for it forever
            await asyncio.wait_for(self._writer.wait_closed(), self.request_timeout)
        except asyncio.TimeoutError:
            self._writer.transport.abort()
        except (OSError, ConnectionError):
            pass

    def pending(self) -> List[int]:
        """Correlation ids of the requests awaiting responses, oldest first."""
        return [entry.correlation_id for entry in self._conn.pending()]
