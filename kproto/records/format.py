"""Constants of the Kafka message format, magic 0 (0.8.x/0.9.x) and magic 1 (0.10.x).

Layout of one message set entry (see ``/work/shared/protocol.md`` §4)::

    offset int64 | message_size int32 | crc uint32 | magic int8 | attributes int8
                 | [timestamp int64, magic 1 only] | key nullable bytes | value nullable bytes

The CRC covers ``magic`` to the end of the message.  Attributes hold the codec in bits 0-2 and, for magic 1,
the timestamp type in bit 3.
"""

from __future__ import annotations

from typing import Dict, Optional

from kproto.errors import EncodeError

__all__ = [
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "CODEC_MASK",
    "CODEC_NAMES",
    "TIMESTAMP_TYPE_MASK",
    "LOG_OVERHEAD",
    "MIN_MESSAGE_SIZE",
    "MIN_MESSAGE_SIZE_V1",
    "NO_TIMESTAMP",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "codec_id",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_MASK = 0x07
CODEC_NAMES: Dict[int, str] = {CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4"}

#: Attribute bit 3 of a magic 1 message: 0 = CreateTime, 1 = LogAppendTime.
TIMESTAMP_TYPE_MASK = 0x08

#: offset (8) + message_size (4): the bytes before each message.
LOG_OVERHEAD = 12
#: crc + magic + attributes + key length + value length: the smallest legal message (Kafka ``MinHeaderSize``).
MIN_MESSAGE_SIZE = 14
#: The same for magic 1, which adds the 8-byte timestamp.
MIN_MESSAGE_SIZE_V1 = 22
#: What magic 1 writes when a message has no timestamp.
NO_TIMESTAMP = -1

#: Default cap on the bytes one decode call may decompress, summed over every compressed wrapper of the
#: message set: 64 MiB.  A broker cuts a fetch at the partition's ``max_bytes`` (1 MiB by default) and a
#: wrapper is at most ``message.max.bytes`` (~1 MB), so 64 MiB leaves room for 64:1 compression of a full
#: default fetch while stopping a decompression bomb (gzip reaches ~1000:1), or many small ones, long before
#: memory runs out.  The cap covers the whole set because its wrappers are all held at once.  Pass
#: ``max_decompressed_size`` to change it.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

_CODEC_IDS: Dict[Optional[str], int] = {
    None: CODEC_NONE,
    "none": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
}


def codec_id(codec: Optional[str]) -> int:
    """The attribute value of a codec name (``None``, ``"gzip"``, ``"snappy"``, ``"lz4"``)."""
    try:
        return _CODEC_IDS[codec]
    except (KeyError, TypeError):
        raise EncodeError(f"unknown codec {codec!r}: expected None, 'gzip', 'snappy' or 'lz4'") from None
