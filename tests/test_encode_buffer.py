"""The compiled encoders' shortcuts write the same bytes as plain code: strings (ASCII written straight from
the str, anything else through UTF-8) and the encode buffer kept between calls (reused after a large or a
failed encode, never shared by nested encodes).  The expected bytes are built here by hand, so the test
holds on both backends."""

from __future__ import annotations

import struct

import pytest

import kproto
from kproto.errors import EncodeError
from kproto.messages import HeartbeatRequest, HeartbeatResponse, ProduceRequest


def _heartbeat_v0(group_id: str, generation_id: int, member_id: str) -> bytes:
    g, m = group_id.encode("utf-8"), member_id.encode("utf-8")
    return struct.pack(">h", len(g)) + g + struct.pack(">ih", generation_id, len(m)) + m


class Text(str):
    """A str subclass: takes the general (``str.encode``) path of the compiled string writer."""


@pytest.mark.parametrize(
    "group_id, member_id",
    [
        ("billing-consumers", "consumer-1-5a1f7c0e"),  # ASCII: copied straight out of the str
        ("bïlling-€", "成员-1"),  # two- and three-byte UTF-8
        (Text("sub"), Text("class")),
        ("", ""),
    ],
)
def test_string_fields_are_their_utf8(group_id, member_id):
    msg = HeartbeatRequest(group_id=group_id, generation_id=-7, member_id=member_id)
    assert msg.encode(0) == _heartbeat_v0(group_id, -7, member_id)
    flexible = msg.encode(4)  # compact lengths, null group_instance_id, empty tag section
    g, m = group_id.encode("utf-8"), member_id.encode("utf-8")
    assert flexible == bytes([len(g) + 1]) + g + struct.pack(">i", -7) + bytes([len(m) + 1]) + m + b"\x00\x00"


def test_kept_buffer_holds_no_bytes_of_an_earlier_or_failed_encode():
    small = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    expected = _heartbeat_v0("g", 1, "m")
    records = b"\xab" * 100_000  # above the largest buffer kept between encodes
    big = ProduceRequest.from_dict(
        {
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
        }
    )
    big_bytes = big.encode(3)
    assert big_bytes.endswith(records) and big.encode(3) == big_bytes
    assert small.encode(0) == expected
    with pytest.raises(EncodeError, match="generation_id"):  # fails after group_id was written
        HeartbeatRequest(group_id="a-long-group-name", generation_id=1 << 40, member_id="m").encode(0)
    assert small.encode(0) == expected
    frame = kproto.encode_request(small, 0, 7, "c")
    assert frame == struct.pack(">ihhih", len(frame) - 4, 12, 0, 7, 1) + b"c" + expected
    with pytest.raises(EncodeError):
        kproto.encode_request(HeartbeatRequest(group_id=b"not text"), 0, 8, "c")
    assert kproto.encode_request(small, 0, 7, "c") == frame
    # v4: response header v1 (its empty tag section), then throttle time, error code, empty tag section.
    assert kproto.encode_response(HeartbeatResponse(error_code=27), 4, 9) == struct.pack(">iiBihB", 12, 9, 0, 0, 27, 0)
