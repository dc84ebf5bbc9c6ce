"""Recording the mock broker's traffic as TCP conversations, written to a pcap at the end.

Every chunk read from or written to a client socket is kept with its wall-clock time, per connection,
exactly as it crossed the socket.  :meth:`TrafficRecorder.write` hands the conversations to
:func:`kproto.capture.writer.write_capture`, which builds real TCP/IP packets (handshake, sequence
numbers, FIN) so that :func:`kproto.capture.conversation.decode_capture` and tshark read them back.
``server_port`` rewrites the broker's port in the file (e.g. to 9092, where tshark looks for Kafka by
default); client addresses stay as they were.
"""

from __future__ import annotations

import os
import threading
import time
from typing import List, Optional, Tuple, Union

from kproto.capture.writer import Side, TcpConversation, write_capture

__all__ = ["ConnectionRecording", "TrafficRecorder"]

Address = Tuple[str, int]


class ConnectionRecording:
    """The bytes of one connection in both directions, in the order they crossed the socket."""

    def __init__(self, client: Address, server: Address) -> None:
        self.client = client
        self.server = server
        self.messages: List[Tuple[Side, bytes, float]] = []
        self.closed = False

    def from_client(self, data: bytes) -> None:
        if data:
            self.messages.append((Side.CLIENT, bytes(data), time.time()))

    def from_server(self, data: bytes) -> None:
        if data:
            self.messages.append((Side.SERVER, bytes(data), time.time()))


class TrafficRecorder:
    """All recorded connections of one broker."""

    def __init__(self, *, server_port: Optional[int] = None) -> None:
        self.server_port = server_port
        self._lock = threading.Lock()
        self._connections: List[ConnectionRecording] = []

    def connection(self, client: Address, server: Address) -> ConnectionRecording:
        """Start recording a new connection."""
        recording = ConnectionRecording(client, server)
        with self._lock:
            self._connections.append(recording)
        return recording

    def write(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """Write every connection with traffic to ``path`` (pcap); returns the packets written."""
        with self._lock:
            recordings = [r for r in self._connections if r.messages]
        conversations = [self._conversation(r) for r in recordings]
        written = write_capture(path, conversations)
        return written.packets

    def _conversation(self, recording: ConnectionRecording) -> TcpConversation:
        server = recording.server
        if self.server_port is not None:
            server = (server[0], self.server_port)
        return TcpConversation(client=recording.client, server=server, messages=list(recording.messages))
