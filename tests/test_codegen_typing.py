"""The public surface type-checks for a user: ``mypy --strict`` on a small consumer program.

The program imports only public names (``kproto``, ``kproto.messages``, ``kproto.errors``), decodes a
response without a cast (``decode_response`` is overloaded per api key), reads the generated attributes and
field tables, and catches kproto's errors.  A wrong annotation, a private path a user would need, or a
re-export mypy does not see fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys

PROGRAM = '''
from typing import List, Optional, Tuple

import kproto
from kproto.errors import DecodeError, KprotoError
from kproto.messages import FieldInfo, MetadataRequest, MetadataResponse


def topics_of(frame: bytes) -> List[str]:
    header, response = kproto.decode_response(frame, 3, 12)
    correlation: int = header.correlation_id
    names: List[str] = [t.name for t in response.topics if t.name is not None]
    return names + [str(correlation)]


def request(version: int) -> bytes:
    msg = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    return kproto.encode_request(msg, version, correlation_id=1, client_id="typed")


def flexible(name: str) -> Optional[Tuple[int, int]]:
    info = kproto.APIS[name]
    return info.flexible_versions


def rows() -> List[FieldInfo]:
    return list(MetadataResponse.FIELDS)


def code(value: int) -> str:
    return kproto.ErrorCode(value).name


def safe(frame: bytes) -> Optional[MetadataResponse]:
    try:
        return kproto.decode_response(frame, 3, 12)[1]
    except DecodeError as exc:
        print(exc.offset, exc.path)
    except KprotoError:
        pass
    return None
'''


def test_consumer_program_passes_mypy_strict(tmp_path):
    program = tmp_path / "consumer.py"
    program.write_text(PROGRAM)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(program),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        env=dict(os.environ, MYPYPATH=root),
    )
    assert result.returncode == 0, result.stdout + result.stderr
