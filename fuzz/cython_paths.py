"""Drive only the compiled code paths over fuzz corpora (what ``fuzz/valgrind_cython.sh`` runs under memcheck).

For every input of the corpora given (default: all of ``fuzz/corpus``), in the layout of the harness its
directory belongs to, this calls the Cython build directly: ``decode_request``/``decode_response`` (and
re-encoding what decodes) for frames, the compiled record core's ``decode``/``decode_columns``/
``encode_plain`` (iterating and indexing the lazy result) and ``decode_records``/``decode_record_columns``/
``encode_batch`` for records of any magic, ``crc32`` of ``kproto._fast._checksums``, and
``kproto._fast._record_json`` over what decodes; the capture, hex and broker corpora are skipped (pure
Python).  No tracemalloc, no pure twin: valgrind is slow enough.
Errors kproto raises on purpose are expected and ignored; the point is what memcheck sees.

    python fuzz/cython_paths.py [DIR ...]    # DIR named after its harness, e.g. .../message_sets
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    from kproto import framing
    from kproto.errors import KprotoError
    from kproto._backend import RECORD_MODULES, records_module
    from kproto._fast import _checksums, _record_json
    from fuzz.atheris_runtime import corpus_files
    from fuzz import fuzz_message_sets as ms, fuzz_request_frames as rq, fuzz_response_frames as rs
    from fuzz.oracles import twin_name
    from fuzz.twin_backends import is_compiled

    fast = records_module(True)
    compiled = [sys.modules[name] for name, _ in RECORD_MODULES]
    assert twin_name(framing) == "compiled" and all(map(is_compiled, compiled)), "the compiled extensions are not built"
    dirs = (argv if argv is not None else sys.argv[1:]) or [
        os.path.join(ROOT, "fuzz", "corpus", n) for n in ("request_frames", "response_frames", "message_sets")
    ]
    count = 0
    for d in dirs:
        kind = os.path.basename(os.path.normpath(d))
        for path in corpus_files([d]):
            data = open(path, "rb").read()
            count += 1
            try:
                if kind == "request_frames":
                    header, msg = framing.decode_request(rq.frame_of(data))
                    framing.decode_request(
                        framing.encode_request(msg, header.api_version, header.correlation_id, header.client_id)
                    )
                elif kind == "response_frames":
                    chosen = rs.select(data)
                    if chosen:
                        header, msg = framing.decode_response(chosen[2], chosen[0], chosen[1])
                        framing.encode_response(msg, chosen[1], header.correlation_id)
                elif kind == "message_sets":
                    payload, raw, check_crc = ms.prepare(data)
                    _checksums.crc32(raw)
                    _record_json.base64_json(raw)
                    for check in (check_crc, not check_crc):
                        try:
                            result = fast.decode(payload, check, 1 << 18)
                            items = list(result)
                            _record_json.message_list_json(iter(items), len(items))
                            if items:
                                result[len(items) - 1]
                                fast.encode_plain([(m.key, m.value, m.timestamp) for m in items], 1, 0, 0)
                                fast.encode_plain([(m.key, m.value) for m in items], 0, items[0].offset, 0)
                        except (KprotoError, OverflowError):  # OverflowError: known issue K4 (offsets)
                            pass
                        try:
                            cols = fast.decode_columns(payload, check, 1 << 18)
                            cols.keys(), cols.values()
                        except KprotoError:
                            pass
                        try:  # records of any magic: objects (headers built lazily), columns, re-encoding
                            for r in fast.decode_records(payload, check, 1 << 18):  # each dropped: tuples refilled
                                r.headers
                            records = list(fast.decode_records(payload, check, 1 << 18))
                            [r.headers for r in records]
                            _record_json.record_list_json(iter(records), len(records))
                            fast.encode_batch(
                                [(r.key, r.value, r.timestamp, r.headers) for r in records], 0, 0, -1, -1, -1, 0, -1, 0
                            )
                            fast.decode_record_columns(payload, check, 1 << 18).headers()
                        except (KprotoError, OverflowError):
                            pass
                else:
                    count -= 1
            except KprotoError:
                pass
    print(f"cython_paths: {count} inputs driven through the compiled code", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
