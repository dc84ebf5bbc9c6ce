"""Recording the mock broker's traffic to a pcap file, packet by packet, as it crosses the sockets.

Why streaming
=============

A recording is for the traffic a user could not otherwise see, often a long test run: held in memory
until the broker stops, 300 MB of traffic cost 700 MB of RAM, and a path that turned out unwritable
at exit lost all of it.  So :class:`TrafficRecorder` opens its file when it is created (an unwritable
path fails the broker's start, not its end) and writes every chunk read from or written to a client
the moment it happens: each connection has a :class:`~kproto.pcap.writer.TcpSegmenter` that gives
it a handshake, sequence numbers and a closing FIN, and :func:`~kproto.pcap.writer.build_frame`
turns the segments into Ethernet/IPv4/TCP packets that kproto's reader and tshark accept.

The file is opened without following a symbolic link at its path (``O_NOFOLLOW``): a recording path in
a shared directory must not become a way to overwrite whatever the link points at.  Pass
``follow_symlinks=True`` to allow it.  ``server_port`` rewrites the broker's port in the file (e.g. to
9092, where tshark looks for Kafka by default); client addresses stay as they were.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import BinaryIO, Optional, Tuple, Union

from kproto.pcap.numbers import LINKTYPE_ETHERNET
from kproto.pcap.writer import PcapWriter, PlannedSegment, TcpSegmenter, build_frame

__all__ = ["ConnectionRecording", "TrafficRecorder", "open_recording"]

Address = Tuple[str, int]
PathLike = Union[str, "os.PathLike[str]"]


def open_recording(path: PathLike, *, follow_symlinks: bool = False) -> BinaryIO:
    """Open ``path`` for a new recording (created or truncated); refuses a symlink unless allowed.

    Raises :class:`OSError` when the path cannot be written, so callers fail before serving anyone.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    return os.fdopen(fd, "wb")


def _now_ns() -> int:
    return time.time_ns() // 1000 * 1000  # microsecond precision, as a pcap keeps it


class ConnectionRecording:
    """The packets of one connection, written to the recorder's file as the bytes cross the socket."""

    def __init__(self, recorder: "TrafficRecorder", segmenter: TcpSegmenter) -> None:
        self._recorder = recorder
        self._segmenter = segmenter
        self._last_ns = 0
        self.closed = False
        self._write(segmenter.handshake(self._stamp()))

    def _stamp(self) -> int:
        # Packets of one connection keep increasing timestamps even when the clock does not move.
        self._last_ns = max(_now_ns(), self._last_ns + 1000)
        return self._last_ns

    def _write(self, segments: "list[PlannedSegment]") -> None:
        if segments:
            self._last_ns = max(self._last_ns, segments[-1].timestamp_ns)
            self._recorder._write_segments(segments)

    def from_client(self, data: bytes) -> None:
        """Bytes read from the client."""
        if data and not self.closed:
            self._write(self._segmenter.data(True, data, self._stamp()))

    def from_server(self, data: bytes) -> None:
        """Bytes written to the client."""
        if data and not self.closed:
            self._write(self._segmenter.data(False, data, self._stamp()))

    def close(self) -> None:
        """The connection ended: FIN both ways."""
        if not self.closed:
            self.closed = True
            self._write(self._segmenter.close(self._stamp()))


class TrafficRecorder:
    """Every connection of one broker, written to one pcap file as it happens; see the module docstring."""

    def __init__(self, path: PathLike, *, server_port: Optional[int] = None, follow_symlinks: bool = False) -> None:
        self.path = path
        self.server_port = server_port
        self._lock = threading.Lock()
        self._stream: Optional[BinaryIO] = open_recording(path, follow_symlinks=follow_symlinks)
        self._pcap = PcapWriter(self._stream, LINKTYPE_ETHERNET)
        self._stream.flush()
        self._connections = 0
        #: Packets written so far.
        self.packets = 0

    def connection(self, client: Address, server: Address) -> ConnectionRecording:
        """Start recording a new connection (its handshake is written at once)."""
        if self.server_port is not None:
            server = (server[0], self.server_port)
        with self._lock:
            index = self._connections
            self._connections += 1
        return ConnectionRecording(self, TcpSegmenter(client, server, index=index))

    def _write_segments(self, segments: "list[PlannedSegment]") -> None:
        with self._lock:
            if self._stream is None:
                return
            for seg in segments:
                self._pcap.write(seg.timestamp_ns, build_frame(seg, LINKTYPE_ETHERNET, ip_id=self.packets))
                self.packets += 1
            self._stream.flush()  # a crash or kill loses at most the packet being written

    def save_copy(self, path: PathLike) -> int:
        """Copy what was recorded so far to ``path``; returns the packets in it."""
        with self._lock:
            if self._stream is not None:
                self._stream.flush()
            shutil.copyfile(self.path, path)
            return self.packets

    def close(self) -> int:
        """Close the file; returns the packets written.  Connections still open get no FIN."""
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None
            return self.packets
