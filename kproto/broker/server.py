"""The mock broker's network side: asyncio streams around :class:`~kproto.connection.ServerConnection`.

Each accepted connection runs two tasks.  The *reader* feeds socket bytes to the sans-I/O connection
and queues the requests it yields (at most ``max_queued_requests`` ahead, so a client that pipelines
without reading cannot grow memory).  The *processor* handles them one at a time, in order, as a 0.9
broker does (it mutes a connection while one of its requests is in progress), applies injected faults,
and writes each response.  When either side ends -- the client closes, a frame is too large or does
not decode, a fault drops the connection, a handler fails -- both tasks stop and the socket is closed;
the broker itself stays up.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Optional, Set, Tuple

from kproto.broker.config import BrokerConfig
from kproto.broker.faults import FaultPlan, error_response
from kproto.broker.handlers import BrokerCore
from kproto.broker.recording import ConnectionRecording, TrafficRecorder
from kproto.connection.server import BadRequest, ClientClosed, RequestReceived, ServerConnection
from kproto.errors import KprotoError

__all__ = ["BrokerServer"]

log = logging.getLogger("kproto.broker")

_READ_SIZE = 256 * 1024
_DROP = object()  # what _answer returns to have the connection closed


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
    ) -> None:
        self.core = core
        self.faults = faults
        self.config: BrokerConfig = core.config
        self.recorder = recorder
        self._host, self._port = host, port
        self._server: Optional[asyncio.AbstractServer] = None
        self._tasks: Set[asyncio.Task] = set()
        self._writers: Set[asyncio.StreamWriter] = set()
        self._stopping = False
        self.connections_accepted = 0

    @property
    def address(self) -> Tuple[str, int]:
        """The (host, port) actually listened on."""
        if self._server is None:
            raise RuntimeError("the broker is not started")
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self._host, self._port, reuse_address=True)
        self.core.bind(*self.address)
        self._track(asyncio.ensure_future(self.core.run_timers()))

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

    def _track(self, task: asyncio.Task) -> asyncio.Task:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
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
        conn = ServerConnection(max_frame_size=self.config.max_frame_size, broker_quirks=self.config.broker_quirks)
        queue: asyncio.Queue = asyncio.Queue(self.config.max_queued_requests)
        processor = self._track(asyncio.ensure_future(
            self._process(conn, queue, writer, "/" + str(peer[0]), recording)))
        finish_queue = False
        try:
            finish_queue = await self._read(conn, queue, reader, recording, processor)
        except (ConnectionError, OSError, KprotoError) as exc:
            log.debug("connection from %s ends: %s", peer, exc)
        finally:
            if not finish_queue:
                processor.cancel()  # the client is gone or broke the framing: nobody reads answers
            try:
                await processor
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - a connection never takes the broker down
                pass
            writer.close()
            if recording is not None:
                recording.closed = True

    async def _read(self, conn: ServerConnection, queue: asyncio.Queue, reader: asyncio.StreamReader,
                    recording: Optional[ConnectionRecording], processor: asyncio.Task) -> bool:
        """Queue requests until the stream ends; True when the processor should finish the queue first
        (a bad request: earlier requests are answered, then the connection closes)."""
        while not processor.done():
            data = await reader.read(_READ_SIZE)
            if recording is not None:
                recording.from_client(data)
            for event in conn.receive_data(data):
                if isinstance(event, ClientClosed):
                    return False
                if not await self._enqueue(queue, event, processor):
                    return False
                if isinstance(event, BadRequest):
                    return True
        return False

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

    async def _process(self, conn: ServerConnection, queue: asyncio.Queue, writer: asyncio.StreamWriter,
                       client_host: str, recording: Optional[ConnectionRecording]) -> None:
        try:
            while True:
                event = await queue.get()
                if isinstance(event, BadRequest):
                    log.debug("closing a connection after a bad request: %s", event.error)
                    return
                frame = await self._answer(conn, event, client_host)
                if frame is _DROP:
                    return
                if frame:
                    if recording is not None:
                        recording.from_server(frame)
                    writer.write(frame)
                    await writer.drain()
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError, KprotoError) as exc:
            log.debug("connection closed: %s", exc)
        except Exception:  # noqa: BLE001 - a bug in a handler closes one connection, not the broker
            log.exception("mock broker handler failed; closing the connection")
        finally:
            writer.close()

    async def _answer(self, conn: ServerConnection, request: RequestReceived, client_host: str) -> object:
        """The response frame for ``request``, b"" when none is due, or _DROP to close the connection."""
        fault = self.faults.take(request.api_key)
        if fault is not None and fault.delay > 0:
            await asyncio.sleep(fault.delay)
        if fault is not None and (fault.drop or (fault.error is not None and not request.expects_response)):
            return _DROP  # an acks=0 Produce that fails closes the connection, as in 0.9
        if fault is not None and fault.error is not None:
            response = error_response(request.api_key, request.message, fault.error, request.api_version)
        else:
            response = await self.core.handle(request, client_host)
        if not request.expects_response:
            return b""
        return conn.send_response(request, response)

