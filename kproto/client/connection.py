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

__all__ = ["CLIENT_VERSIONS", "BrokerConnectionError", "BrokerVersions", "Connection"]

#: How a broker that cannot answer ApiVersions is described: its release line (``"0.9.0"``), or its version
#: ranges per api key.
BrokerVersions = Union[str, VersionRanges]

#: The versions of each API the client layer knows how to fill and read.  The upper bounds stop where a
#: version changes meaning the client does not implement: Produce/Fetch v13 address topics by id, Metadata
#: v13 moved errors, OffsetFetch v8 batches groups.  Group APIs follow :mod:`kproto.group.member`.
CLIENT_VERSIONS: Mapping[int, Tuple[int, int]] = {
    0: (0, 12),   # Produce
    1: (0, 12),   # Fetch
    2: (0, 7),    # ListOffsets
    3: (0, 12),   # Metadata
    8: (0, 8),    # OffsetCommit
    9: (0, 7),    # OffsetFetch
    10: (0, 4),   # FindCoordinator (GroupCoordinator)
    11: (0, 9),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 5),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    18: (0, 4),   # ApiVersions
    22: (0, 4),   # InitProducerId
}

_READ_SIZE = 256 * 1024


class BrokerConnectionError(KprotoError, ConnectionError):
    """The connection to a broker failed or closed; requests still waiting on it get this error."""


class Connection:
    """One connection to one broker; build it with :meth:`open`.

    ``max_in_flight`` bounds the requests awaiting responses: :meth:`request` waits for room instead of
    raising.  Requests are written in the order :meth:`request` is called and answered in that order.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, client_id: str,
                 max_in_flight: int, max_frame_size: int) -> None:
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
    ) -> "Connection":
        """Connect and settle the version of every API (see the module docstring)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        conn = cls(reader, writer, client_id=client_id, max_in_flight=max_in_flight, max_frame_size=max_frame_size)
        try:
            if broker_release is not None:
                conn.versions = negotiate(broker_release, CLIENT_VERSIONS)
            else:
                try:
                    answer = await conn.request(ApiVersionsRequest(), version=0)
                except BrokerConnectionError as exc:
                    raise BrokerConnectionError(
                        f"{host}:{port} closed the connection on ApiVersions: a broker older than 0.10.0 must be "
                        "named with broker_release (e.g. '0.9.0')") from exc
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

    async def request(self, message: Message, version: Optional[int] = None) -> Message:
        """Send ``message`` (in ``version``, default the negotiated one) and return the decoded response."""
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
        try:
            if self._writer.transport.get_write_buffer_size() > _READ_SIZE:
                await self._drain()
            return await future
        finally:
            self._room.release()

    async def send_one_way(self, message: Message, version: Optional[int] = None) -> None:
        """Write a request that gets no response (a Produce with ``acks=0``); returns once it is written."""
        api_key = message.API_KEY
        assert api_key is not None
        self._check_open()
        sent = self._conn.send(message, self.version(api_key) if version is None else version)
        if sent.expects_response:
            raise ProtocolError(f"{type(message).__name__} expects a response: use request()")
        self._writer.write(sent.frame)
        await self._drain()

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
                        self._fail(BrokerConnectionError("the broker closed the connection"))
                        return
        except asyncio.CancelledError:
            self._fail(BrokerConnectionError("the connection was closed"))
            raise
        except (OSError, ConnectionError) as exc:
            self._fail(BrokerConnectionError(f"connection lost: {exc}"))
        except KprotoError as exc:  # the broker broke the protocol: nothing more can be trusted
            self._fail(exc)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(self._error)
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
            await self._writer.wait_closed()
        except (OSError, ConnectionError):
            pass

    def pending(self) -> List[int]:
        """Correlation ids of the requests awaiting responses, oldest first."""
        return [entry.correlation_id for entry in self._conn.pending()]
