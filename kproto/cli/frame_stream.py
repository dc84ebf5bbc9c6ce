"""Splitting the bytes of ``decode``/``hexdump`` input into size-prefixed frames, surviving bad input.

Unlike :class:`kproto.FrameReader`, which gives up for good on a bad size prefix (right for a live
socket), a file of frames is worth reading on: a size that is negative or above ``max_frame_size`` is
reported, and the bytes after it are scanned for the next plausible request header (a size within the
limit, a known api key and version, a printable client id).  Memory stays bounded: a frame is buffered
only when its size is within the limit, and bytes scanned without finding a frame are dropped once
there are more than ``max_scan_bytes`` of them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Union

from kproto.framing import (
    MIN_REQUEST_SIZE,
    MIN_RESPONSE_SIZE,
    REQUEST_CANDIDATE,
    Bytes,
    ResyncingSplitter,
    plausible_request_header,
)

__all__ = ["InputFrame", "InputProblem", "FrameSplitter", "split_frames"]

_I32 = struct.Struct(">i")


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
    problems in input order.  ``responses`` lowers the smallest acceptable size to a response's.
    The boundaries and the skip accounting are :class:`kproto.framing.ResyncingSplitter`'s; this class
    turns them into the items the CLI prints."""

    def __init__(self, max_frame_size: int, *, responses: bool = False, max_scan_bytes: int = 1 << 20) -> None:
        self.max_frame_size = max_frame_size
        self.min_size = MIN_RESPONSE_SIZE if responses else MIN_REQUEST_SIZE
        self.max_scan_bytes = max_scan_bytes
        self._split = ResyncingSplitter()
        self._frames = 0

    def feed(self, chunk: bytes) -> List[Item]:
        self._split.buf += chunk
        out: List[Item] = []
        while self._step(out, final=False):
            pass
        return out

    def finish(self) -> List[Item]:
        out: List[Item] = []
        while self._step(out, final=True):
            pass
        split = self._split
        if split.buf:
            if split.synced:
                out.append(self._truncated())
                split.drop(len(split.buf), counted=False)
            else:
                split.drop(len(split.buf))
        self._report_skipped(out)
        return out

    def _step(self, out: List[Item], final: bool) -> bool:
        """One step: a frame, a bad size, or a resync; returns whether it made progress."""
        split = self._split
        if not split.synced:
            found = split.resync(
                self._plausible_request, final=final, candidates=REQUEST_CANDIDATE, max_keep=self.max_scan_bytes
            )
            if found:
                self._report_skipped(out)
            return found
        found_frame = split.next_frame(self.min_size, self.max_frame_size)
        if found_frame is not None:
            frame, offset, _ = found_frame
            out.append(InputFrame(self._frames, offset, frame))
            self._frames += 1
            return True
        if split.bad_size is None:
            return False
        out.append(
            InputProblem(
                "bad-size",
                split.base,
                f"frame size {split.bad_size} outside {self.min_size}..{self.max_frame_size}; "
                "looking for the next frame",
            )
        )
        split.lose_sync(4)
        return True

    def _plausible_request(self, buf: Bytes, pos: int) -> Optional[bool]:
        """True/False, or None when more bytes are needed to tell."""
        return plausible_request_header(buf, pos, self.max_frame_size)

    def _report_skipped(self, out: List[Item]) -> None:
        skipped = self._split.take_skipped()
        if skipped is not None:
            offset, count = skipped
            out.append(InputProblem("skipped", offset, f"{count} bytes skipped: no frame starts there"))

    def _truncated(self) -> InputProblem:
        buf = self._split.buf
        have = len(buf)
        if have < 4:
            return InputProblem("truncated-frame", self._split.base, f"input ended {have} bytes into a size prefix")
        size = _I32.unpack_from(buf, 0)[0]
        return InputProblem(
            "truncated-frame",
            self._split.base,
            f"input ended {have} bytes into a frame of {size + 4} bytes ({size + 4 - have} missing)",
        )


def split_frames(chunks: Iterable[bytes], max_frame_size: int, *, responses: bool = False) -> Iterator[Item]:
    """Frames and problems of a chunked input, in order (see :class:`FrameSplitter`)."""
    splitter = FrameSplitter(max_frame_size, responses=responses)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.finish()
