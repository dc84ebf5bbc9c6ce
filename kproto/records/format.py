"""Constants of Kafka's three record formats: magic 0 (0.8/0.9), magic 1 (0.10) and magic 2 (0.11+).

The layouts, and why each constant has its value, are written out in ``docs/records.md``.  In short, a
magic 0/1 message set entry is::

    offset int64 | message_size int32 | crc uint32 | magic int8 | attributes int8
                 | [timestamp int64, magic 1 only] | key nullable bytes | value nullable bytes

and a magic 2 record batch starts with the 61-byte header::

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 | crc uint32
    | attributes int16 | last_offset_delta int32 | base_timestamp int64 | max_timestamp int64
    | producer_id int64 | producer_epoch int16 | base_sequence int32 | records_count int32

Every format puts ``magic`` at byte 16 of an entry, which is how a reader tells them apart.
"""

from __future__ import annotations

from typing import Dict, Optional

from kproto.errors import EncodeError

__all__ = [
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "BATCH_HEADER_SIZE",
    "MIN_BATCH_LENGTH",
    "BATCH_CRC_AT",
    "BATCH_CRC_FROM",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "codec_name",
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
#: zstd exists only in magic 2 batches (Kafka 2.1+).
CODEC_ZSTD = 4
CODEC_MASK = 0x07
CODEC_NAMES: Dict[int, str] = {CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"}

#: Magic 2 batch attribute bits (int16): codec in bits 0-2, then these.
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
#: The batch's base timestamp is the delete horizon of a compacted log (Kafka 3.0+, KIP-534).
ATTR_DELETE_HORIZON = 0x40

#: base_offset (8) + batch_length (4) + the 49 bytes batch_length counts before the first record.
BATCH_HEADER_SIZE = 61
#: The smallest legal batch_length: a header with no records.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - 12
#: Where the CRC-32C sits in a batch, and where the bytes it covers start (attributes to the end).
BATCH_CRC_AT = 17
BATCH_CRC_FROM = 21

#: Control record types of transaction markers (the key's int16 type field).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

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
    "zstd": CODEC_ZSTD,
}


def codec_id(codec: Optional[str]) -> int:
    """The attribute value of a codec name (``None``, ``"gzip"``, ``"snappy"``, ``"lz4"``, ``"zstd"``)."""
    try:
        return _CODEC_IDS[codec]
    except (KeyError, TypeError):
        raise EncodeError(f"unknown codec {codec!r}: expected None, 'gzip', 'snappy', 'lz4' or 'zstd'") from None


def codec_name(codec: int) -> Optional[str]:
    """The name encoding takes for a codec id (``None`` for uncompressed): what decoded records report."""
    return CODEC_NAMES.get(codec)
