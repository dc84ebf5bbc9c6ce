"""The shared resyncing splitter on its own: refusal of a bad size, the resync scan, the skip accounting,
and that chunking changes none of them (capture and CLI tests cover it through their readers)."""

from __future__ import annotations

from typing import List, Optional, Tuple

import kproto
from kproto.messages import MetadataRequest
from kproto.framing import MIN_REQUEST_SIZE, REQUEST_CANDIDATE, ResyncingSplitter, plausible_request_header

MAX = 1 << 20


def _request(corr: int) -> bytes:
    return kproto.encode_request(MetadataRequest(topics=[]), 0, corr, "client-1")


def _split(
    data: bytes, chunk: int, candidates: bool
) -> Tuple[List[Tuple[int, bytes]], List[Tuple[int, int]], List[int]]:
    """Frames (offset, bytes), skipped runs and refused sizes, resyncing after a bad size as the CLI does."""
    split = ResyncingSplitter()
    frames: List[Tuple[int, bytes]] = []
    skipped: List[Tuple[int, int]] = []
    refused: List[int] = []

    def plausible(buf: bytes, pos: int) -> Optional[bool]:
        return plausible_request_header(buf, pos, MAX)

    def pump(final: bool) -> None:
        while True:
            if not split.synced:
                if not split.resync(plausible, final=final, candidates=REQUEST_CANDIDATE if candidates else None):
                    return
                run = split.take_skipped()
                if run is not None:
                    skipped.append(run)
            found = split.next_frame(MIN_REQUEST_SIZE, MAX)
            if found is None:
                if split.bad_size is None:
                    return
                refused.append(split.bad_size)
                split.lose_sync(4)
                continue
            frames.append((found[1], found[0]))

    for i in range(0, len(data), chunk):
        split.buf += data[i : i + chunk]
        pump(False)
    pump(True)
    return frames, skipped, refused


def test_a_bad_size_is_refused_without_consuming_anything() -> None:
    split = ResyncingSplitter()
    split.buf += b"\xff\xff\xff\xf0" + b"x" * 8
    assert split.next_frame(MIN_REQUEST_SIZE, MAX) is None
    assert split.bad_size == -16 and len(split.buf) == 12 and split.base == 0 and split.synced


def test_resync_skips_garbage_and_reports_where_and_how_much() -> None:
    a, b = _request(1), _request(2)
    garbage = b"\x7f\x00\x00\x01" + b"\x00garbage\x00\x00\x03" * 5
    data = a + garbage + b
    for candidates in (False, True):
        frames, skipped, refused = _split(data, len(data), candidates)
        assert frames == [(0, a), (len(a) + len(garbage), b)]
        assert refused == [0x7F000001]
        assert skipped == [(len(a), len(garbage))]


def test_chunking_changes_nothing() -> None:
    data = _request(1) + b"\x00\x00\x00\x05abc" + bytes(range(40)) + _request(2) + _request(3)[:-3]
    whole = _split(data, len(data), True)
    for chunk in (1, 3, 7):
        assert _split(data, chunk, True) == whole
        assert _split(data, chunk, False) == whole
