"""Input file → frames → decoded frames, with problems in place: the common path of decode and hexdump."""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Union

from kproto.cli.frame_decoding import DecodedFrame, FrameDecoder
from kproto.cli.frame_stream import FrameSplitter, InputFrame, InputProblem
from kproto.cli.hex_input import open_input_chunks
from kproto.cli.progress_bar import ProgressBar

__all__ = ["decoded_frames", "problem_json", "FrameTally"]

Item = Union[DecodedFrame, InputProblem]


class FrameTally:
    """Counts for the summary and the exit code."""

    def __init__(self) -> None:
        self.frames = 0
        self.failed = 0
        self.problems = 0
        self.input_kind = ""

    @property
    def ok(self) -> bool:
        return self.frames > 0 and not self.failed and not self.problems

    def summary(self) -> Dict[str, Any]:
        return {"input": self.input_kind, "frames": self.frames, "failed": self.failed, "problems": self.problems}


def decoded_frames(
    stream: Any,
    total: Optional[int],
    *,
    input_kind: str,
    mode: str,
    api_key: Optional[int],
    api_version: Optional[int],
    max_frame_size: int,
    tally: FrameTally,
) -> Iterator[Item]:
    """Decoded frames and input problems of ``stream``, in input order, counted in ``tally``."""
    chunks = open_input_chunks(stream, total, None if input_kind == "auto" else input_kind)
    tally.input_kind = chunks.kind
    splitter = FrameSplitter(max_frame_size, responses=mode != "request")
    decoder = FrameDecoder(mode, api_key, api_version)
    progress = ProgressBar(total, "decoding")
    try:
        for chunk in chunks.chunks:
            yield from _bad_lines(chunks.bad_lines, tally)
            for item in splitter.feed(chunk):
                yield _decoded(item, decoder, tally)
            progress.update(chunks.position())
        yield from _bad_lines(chunks.bad_lines, tally)
        for item in splitter.finish():
            yield _decoded(item, decoder, tally)
    finally:
        progress.close()


def _bad_lines(bad: list, tally: FrameTally) -> Iterator[InputProblem]:
    while bad:
        exc = bad.pop(0)
        tally.problems += 1
        yield InputProblem("bad-hex", -1, str(exc))


def _decoded(item: Union[InputFrame, InputProblem], decoder: FrameDecoder, tally: FrameTally) -> Item:
    if isinstance(item, InputProblem):
        tally.problems += 1
        return item
    frame = decoder.decode(item.index, item.offset, item.data)
    tally.frames += 1
    if frame.failed:
        tally.failed += 1
    return frame


def problem_json(problem: InputProblem) -> Dict[str, Any]:
    """``{"record": "problem", "kind", "offset", "detail"}`` (offset -1: a hex text line, named in detail)."""
    return {"record": "problem", "kind": problem.kind, "offset": problem.offset, "detail": problem.detail}
