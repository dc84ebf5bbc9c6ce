"""A consumer of the records API type-checks under ``mypy --strict`` with no casts (records, messages,
batches, columns and segments all typed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CONSUMER = textwrap.dedent('''
    from typing import Optional
    from kproto.records import (decode_columns, decode_message_set, decode_records, encode_control_batch,
                                encode_record_batch, read_segment)

    def total(data: bytes) -> int:
        batch: bytes = encode_record_batch([(b"k", b"v", 1, [("h", None)])], codec="zstd")
        marker: bytes = encode_control_batch(True, producer_id=1, producer_epoch=0)
        n = 0
        for r in decode_records(data + batch + marker):
            n += r.offset + r.sequence + r.producer_id
            value: Optional[bytes] = r.value
            codec: Optional[str] = r.codec
            for key, header in r.headers:
                n += len(key) + (len(header) if header is not None else 0)
        for m in decode_message_set(data, check_inner_crc=False):
            n += m.offset + m.crc
        segment = read_segment("00000000000000000000.log")
        for b in segment:
            n += b.base_offset + len(b.records) + b.records_count
        columns = decode_columns(data)
        return n + columns.count + len(columns.headers()) + (segment.torn_tail or 0)
''')


def test_consumer_passes_mypy_strict(tmp_path):
    pytest.importorskip("mypy", reason="mypy is a dev dependency")
    path = tmp_path / "consumer.py"
    path.write_text(CONSUMER)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
