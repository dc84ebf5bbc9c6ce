"""Splitting the bytes of ``decode``/``hexdump`` input into size-prefixed frames, surviving bad input.

Unlike :class:`kproto.FrameReader`, which gives up for good on a bad size prefix (right for a live
socket), a file of frames is worth reading on: a size that is negative or above ``max_frame_size`` is
reported, and the bytes after it are scanned for the next plausible request header (a size within the
limit, a known api key and version, a printable client id).  Memory stays bounded: a frame is buffered
only when its size is within the limit, and bytes scanned without finding a frame are dropped once
there are more than ``max_scan_bytes`` of them.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Union

from kproto.framing import MIN_REQUEST_SIZE, MIN_RESPONSE_SIZE, plausible_request_header

__all__ = ["InputFrame", "InputProblem", "FrameSplitter", "split_frames"]

_I32 = struct.Struct(">i")
# Where a request header may start: a size below 128 MiB (first byte 0..7), api key 0..255, version 0..255.
# The regex only proposes candidates; _plausible_request checks them properly.
_CANDIDATE = re.compile(rb"(?=[\x00-\x07][\x00-\xff]{3}\x00[\x00-\xff]\x00[\x00-\xff])")


@dataclass(frozen=True)
class InputFrame:
    """One complete frame: its number in the input (from 0), input offset of its size prefix, bytes."""

    index: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class InputProblem:
    """Bytes of the input that are not a frame: ``kind`` is ``bad-size``, ``skipped``, ``truncated-frame``
    or ``bad-hex``; ``offset`` is where in the (hex-decoded) input it starts."""

    kind: str
    offset: int
    detail: str


Item = Union[InputFrame, InputProblem]


class FrameSplitter:
    """Incremental frame splitter: :meth:`feed` chunks, then :meth:`finish`; both return frames and
    problems in input order.  ``responses`` lowers the smallest acceptable size to a response's."""

    def __init__(self, max_frame_size: int, *, responses: bool = False, max_scan_bytes: int = 1 << 20) -> None:
        self.max_frame_size = max_frame_size
        self.min_size = MIN_RESPONSE_SIZE if responses else MIN_REQUEST_SIZE
        self.max_scan_bytes = max_scan_bytes
        self._buf = bytearray()
        self._base = 0  # input offset of _buf[0]
        self._synced = True
        self._skipped_from: Optional[int] = None
        self._frames = 0

    def feed(self, chunk: bytes) -> List[Item]:
        self._buf += chunk
        out: List[Item] = []
        while self._step(out, final=False):
            pass
        return out

    def finish(self) -> List[Item]:
        out: List[Item] = []
        while self._step(out, final=True):
            pass
        if self._buf:
            if self._synced:
                out.append(self._truncated())
            else:
                self._mark_skipped(len(self._buf))
            self._drop(len(self._buf))
        self._report_skipped(out)
        return out

    # --- one step of the state machine; returns whether it made progress ---------------------------

    def _step(self, out: List[Item], final: bool) -> bool:
        if not self._synced:
            return self._scan(out, final)
        buf = self._buf
        if len(buf) < 4:
            return False
        size = _I32.unpack_from(buf, 0)[0]
        if size < self.min_size or size > self.max_frame_size:
            out.append(InputProblem("bad-size", self._base,
                                    f"frame size {size} outside {self.min_size}..{self.max_frame_size}; "
                                    "looking for the next frame"))
            self._synced = False
            self._mark_skipped(4)
            self._drop(4)
            return True
        if len(buf) < 4 + size:
            return False
        out.append(InputFrame(self._frames, self._base, bytes(buf[: 4 + size])))
        self._frames += 1
        self._drop(4 + size)
        return True

    def _scan(self, out: List[Item], final: bool) -> bool:
        buf = bytes(self._buf)  # a copy: the buffer cannot shrink while a regex iterates over it
        for match in _CANDIDATE.finditer(buf):
            pos = match.start()
            verdict = self._plausible_request(buf, pos)
            if verdict is None and not final:
                self._mark_skipped(pos)
                self._drop(pos)
                return False  # wait for more bytes to decide
            if verdict:
                self._mark_skipped(pos)
                self._drop(pos)
                self._report_skipped(out)
                self._synced = True
                return True
        keep = 0 if final else min(len(buf), 13)  # a header may start in the last bytes seen
        self._mark_skipped(len(buf) - keep)
        self._drop(len(buf) - keep)
        return False

    def _plausible_request(self, buf: bytes, pos: int) -> Optional[bool]:
        """True/False, or None when more bytes are needed to tell."""
        return plausible_request_header(buf, pos, self.max_frame_size)

    # --- bookkeeping ---------------------------------------------------------------------------------

    def _drop(self, n: int) -> None:
        if n:
            del self._buf[:n]
            self._base += n

    def _mark_skipped(self, n: int) -> None:
        if n and self._skipped_from is None:
            self._skipped_from = self._base

    def _report_skipped(self, out: List[Item]) -> None:
        if self._skipped_from is not None:
            count = self._base - self._skipped_from
            out.append(InputProblem("skipped", self._skipped_from, f"{count} bytes skipped: no frame starts there"))
            self._skipped_from = None

    def _truncated(self) -> InputProblem:
        have = len(self._buf)
        if have < 4:
            return InputProblem("truncated-frame", self._base, f"input ended {have} bytes into a size prefix")
        size = _I32.unpack_from(self._buf, 0)[0]
        return InputProblem("truncated-frame", self._base,
                            f"input ended {have} bytes into a frame of {size + 4} bytes ({size + 4 - have} missing)")


def split_frames(chunks: Iterable[bytes], max_frame_size: int, *, responses: bool = False) -> Iterator[Item]:
    """Frames and problems of a chunked input, in order (see :class:`FrameSplitter`)."""
    splitter = FrameSplitter(max_frame_size, responses=responses)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.finish()
