"""The checks every kproto fuzz harness applies to each input (shared by ``fuzz/fuzz_*.py`` and the tests).

An input passes when all of these hold (a violation raises :class:`OracleFailure`, which atheris reports as
a crash and ``tests/fuzz/test_fuzz_corpora.py`` as a failure):

1. **Only kproto's errors escape.**  A decoder may reject bytes only with a
   :class:`~kproto.errors.KprotoError` (a few APIs document one more class; each harness lists it).
   Anything else (``IndexError``, ``struct.error``, ``UnicodeDecodeError``, ``MemoryError``, ...) is a bug.
2. **Round trip.**  Whatever decodes re-encodes without error, and decoding that again gives the same value
   (:func:`check_round_trip`).
3. **Twins agree.**  The Cython build and the pure-Python source give the same value, or raise the same error
   class at the same offset (:func:`check_same_outcome`; :func:`check_same_seen` where each twin reports
   from its own process, as plain data).
4. **Budget.**  One decode of an input of ``n`` bytes may allocate at most
   ``MEMORY_PER_INPUT_BYTE * n + MEMORY_BASE + MEMORY_PER_DECOMPRESSED_BYTE * cap`` bytes at its peak, as seen by
   :mod:`tracemalloc` (``cap`` is the ``max_decompressed_size`` the harness configures), and at most
   ``TIME_BUDGET_S`` seconds of CPU time (:class:`Budget`).  The harness runners also pass atheris
   ``-timeout`` (a wall-clock backstop for hangs) and ``-rss_limit_mb``.

``tracemalloc`` sees every allocation made through Python's allocators, including the Python objects the
Cython extension creates; C buffers the extension ``malloc``s itself (the column builders) and buffers
inside cramjam are not traced, which is why the valgrind run (``fuzz/valgrind_cython.sh``) exists too.
Set ``KPROTO_FUZZ_BUDGET=0`` to switch the memory check off (for speed while minimising a crash).
"""

from __future__ import annotations

import math
import os
import struct
import time
import tracemalloc
from types import FunctionType, ModuleType
from typing import Any, Callable, List, Optional, Tuple, Type

from kproto.errors import KprotoError

__all__ = [
    "OracleFailure",
    "Outcome",
    "Budget",
    "MEMORY_PER_INPUT_BYTE",
    "MEMORY_PER_DECOMPRESSED_BYTE",
    "MEMORY_BASE",
    "TIME_BUDGET_S",
    "FUZZ_DECOMPRESSION_CAP",
    "memory_budget",
    "outcome",
    "check_same_outcome",
    "ReportedError",
    "Seen",
    "summary",
    "check_same_seen",
    "twin_name",
    "check_round_trip",
    "fail",
    "KNOWN_ISSUES",
    "known_issue",
    "message_value",
    "is_flexible",
    "check_reencoding",
]

#: Bytes one decode may allocate per input byte (objects, copies, error messages).
MEMORY_PER_INPUT_BYTE = 64
#: Bytes one decode may allocate per byte of the configured decompression cap: the decompressed bytes
#: (a growing buffer, then its ``bytes`` copy) and the message objects decoded from them.
MEMORY_PER_DECOMPRESSED_BYTE = 16
#: Fixed allowance per input: first-use caches, small tables, exception objects.
MEMORY_BASE = 1 << 20
#: CPU seconds one input may take (all the work the harness does for it, both backends included).
TIME_BUDGET_S = 1.0
#: ``max_decompressed_size`` the harnesses pass: small, so that bombs are cheap to run into.
FUZZ_DECOMPRESSION_CAP = 256 * 1024


class OracleFailure(AssertionError):
    """An input broke one of the oracles: the message says which one and how."""


def fail(what: str, data: Optional[bytes] = None) -> OracleFailure:
    shown = "" if data is None else f"\ninput ({len(data)} bytes): {data[:256].hex()}{'...' if len(data) > 256 else ''}"
    return OracleFailure(what + shown)


def memory_budget(n: int, cap: int = 0) -> int:
    """Bytes one decode of an ``n``-byte input may allocate (peak), with decompression capped at ``cap``."""
    return MEMORY_PER_INPUT_BYTE * n + MEMORY_BASE + MEMORY_PER_DECOMPRESSED_BYTE * cap


_MEMORY_ON = os.environ.get("KPROTO_FUZZ_BUDGET", "1") != "0"

#: Bugs already found, reported and pinned by ``tests/fuzz/test_fuzz_regressions.py``.  While they are open, the
#: harnesses step around them (so a campaign keeps looking for new ones instead of stopping at the same
#: crash); ``KPROTO_FUZZ_REPORT_KNOWN=1`` makes them fail again, e.g. to check a fix.  Remove an entry
#: when its fix lands.
KNOWN_ISSUES: dict = {
    "B1": "mock broker: BrokerCore serves every version of its 0.9 api keys with 0.9-era handlers, so for the "
    "versions Kafka added since (e.g. FindCoordinator v4+, which moved the coordinator into an array) it "
    "builds answers with fields the version cannot carry and send_response raises UnsupportedVersionError "
    "instead of the broker refusing the version",
}
REPORT_KNOWN = os.environ.get("KPROTO_FUZZ_REPORT_KNOWN") == "1"


def known_issue(key: str) -> bool:
    """True when the harness should step around open issue ``key`` (see :data:`KNOWN_ISSUES`)."""
    return key in KNOWN_ISSUES and not REPORT_KNOWN


def _build_lazy_tables() -> None:
    # One-time lookup tables the pure records twin builds on first use are not per-input work; built here,
    # before any Budget, they do not count against the first input that happens to need them.
    from kproto.records import default_records

    default_records.build_tables()


_build_lazy_tables()


class Budget:
    """Measure one step of work against the memory and CPU budgets::

        with Budget(len(data), cap=FUZZ_DECOMPRESSION_CAP, what="decode_message_set (pure)"):
            decode(...)

    The memory peak is measured from the step's start (``tracemalloc.reset_peak``), so results kept from
    earlier steps do not count against it.
    """

    def __init__(
        self, n: int, *, cap: int = 0, what: str = "", data: Optional[bytes] = None, limit: Optional[int] = None
    ) -> None:
        self.limit = memory_budget(n, cap) if limit is None else limit
        self.what = what
        self.data = data
        self.peak = 0
        self.cpu = 0.0

    def __enter__(self) -> "Budget":
        if _MEMORY_ON:
            if not tracemalloc.is_tracing():
                tracemalloc.start(1)
            tracemalloc.reset_peak()
            self._base = tracemalloc.get_traced_memory()[0]
        self._t0 = time.process_time()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.cpu = time.process_time() - self._t0
        if _MEMORY_ON:
            self.peak = tracemalloc.get_traced_memory()[1] - self._base
        if isinstance(exc, OracleFailure):
            return False
        if self.peak > self.limit:
            raise fail(
                f"memory budget: {self.what} allocated {self.peak} bytes at its peak, budget {self.limit}", self.data
            )
        if self.cpu > TIME_BUDGET_S:
            raise fail(f"time budget: {self.what} took {self.cpu:.2f} s of CPU, budget {TIME_BUDGET_S} s", self.data)
        return False


#: The result of running a decoder on an input: ("ok", value) or ("error", exception).
Outcome = Tuple[str, Any]


def outcome(
    fn: Callable[..., Any],
    *args: Any,
    allowed: Tuple[Type[BaseException], ...] = (KprotoError,),
    what: str = "",
    data: Optional[bytes] = None,
    **kwargs: Any,
) -> Outcome:
    """Run ``fn``; an exception outside ``allowed`` is an :class:`OracleFailure` (oracle 1)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except OracleFailure:
        raise
    except allowed as exc:
        return ("error", exc)
    except BaseException as exc:  # noqa: BLE001 - that is the point: nothing else may escape
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise fail(f"{what or getattr(fn, '__qualname__', fn)} raised {type(exc).__name__}: {exc}", data) from exc


def error_signature(exc: Any) -> Tuple[str, Any]:
    """What must agree between twins for an error: its class and, for decode errors, the offset."""
    if isinstance(exc, ReportedError):
        return (exc.error_class, exc.offset)
    return (type(exc).__name__, getattr(exc, "offset", None))


class ReportedError:
    """An error a twin raised, as plain data: what :func:`error_signature` compares, and its text."""

    def __init__(self, exc: BaseException) -> None:
        self.error_class, self.offset = error_signature(exc)
        self.text = repr(exc)

    def __repr__(self) -> str:
        return self.text


#: What one twin reports about an input: (step, outcome as plain data) per step, in order.
Seen = List[Tuple[str, Outcome]]


def summary(out: Outcome, normalise: Callable[[Any], Any] = lambda v: v) -> Outcome:
    """An outcome as plain data: ("ok", normalised value) or ("error", :class:`ReportedError`)."""
    return ("ok", normalise(out[1])) if out[0] == "ok" else ("error", ReportedError(out[1]))


def check_same_seen(a: Seen, b: Seen, *, data: Optional[bytes] = None, names: Tuple[str, str]) -> None:
    """Oracle 3 over two twins' reports (:data:`Seen`): each step has the same outcome in both."""
    for (what, out_a), (_, out_b) in zip(a, b):
        check_same_outcome(out_a, out_b, what=what, data=data, names=names)
    if [what for what, _ in a] != [what for what, _ in b]:
        raise fail(
            f"the twins took different steps: {names[0]} {[w for w, _ in a]}, {names[1]} {[w for w, _ in b]}", data
        )


def twin_name(framing: ModuleType) -> str:
    """``compiled`` when this process's ``kproto.framing`` runs the compiled build, else ``python``."""
    return "python" if isinstance(framing.encode_request, FunctionType) else "compiled"


def check_same_outcome(
    a: Outcome,
    b: Outcome,
    *,
    what: str,
    data: Optional[bytes] = None,
    normalise: Callable[[Any], Any] = lambda v: v,
    names: Tuple[str, str] = ("cython", "python"),
) -> None:
    """Oracle 3: both twins decoded to equal (normalised) values, or failed with the same class and offset."""
    if a[0] != b[0]:
        ea = a[1] if a[0] == "error" else None
        eb = b[1] if b[0] == "error" else None
        raise fail(
            f"{what}: {names[0]} {'raised ' + repr(ea) if ea else 'decoded'}, "
            f"{names[1]} {'raised ' + repr(eb) if eb else 'decoded'}",
            data,
        )
    if a[0] == "error":
        sa, sb = error_signature(a[1]), error_signature(b[1])
        if sa != sb:
            raise fail(f"{what}: errors differ: {names[0]} {sa} {a[1]!r}, {names[1]} {sb} {b[1]!r}", data)
        return
    va, vb = normalise(a[1]), normalise(b[1])
    if va != vb:
        raise fail(f"{what}: values differ:\n  {names[0]}: {_short(va)}\n  {names[1]}: {_short(vb)}", data)


def check_round_trip(
    first: Any,
    encode: Callable[[], Any],
    decode: Callable[[Any], Any],
    *,
    what: str,
    data: Optional[bytes] = None,
    normalise: Callable[[Any], Any] = lambda v: v,
    allowed: Tuple[Type[BaseException], ...] = (),
) -> Any:
    """Oracle 2: ``encode()`` works on a decoded value and ``decode(encoded)`` gives the value back.

    Returns the encoded form.  No exception is acceptable from either step unless listed in ``allowed``.
    """
    try:
        encoded = encode()
    except allowed:
        return None
    except Exception as exc:  # noqa: BLE001
        raise fail(f"{what}: re-encoding a decoded value raised {type(exc).__name__}: {exc}", data) from exc
    try:
        again = decode(encoded)
    except Exception as exc:  # noqa: BLE001
        raise fail(
            f"{what}: decoding the re-encoded bytes raised {type(exc).__name__}: {exc}\n"
            f"  re-encoded: {bytes(encoded)[:256].hex()}",
            data,
        ) from exc
    if normalise(again) != normalise(first):
        raise fail(
            f"{what}: decode(encode(decode(x))) differs from decode(x):\n  first: {_short(normalise(first))}\n"
            f"  again: {_short(normalise(again))}",
            data,
        )
    return encoded


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def message_value(obj: Any) -> Any:
    """A generated message or struct as plain comparable data, for the twin and round-trip oracles.

    Walks the ``FIELDS`` table (every field of every version) and adds each struct's
    ``unknown_tagged_fields``, so tagged data the decoder kept but does not know is compared too.  Floats
    compare by their bytes (a NaN decoded by both twins is the same value); record sets by their raw bytes.
    """
    fields = getattr(type(obj), "FIELDS", None)
    if fields is None:
        return message_value_of(obj)
    out = {info.name: message_value_of(getattr(obj, info.name)) for info in fields}
    unknown = getattr(obj, "unknown_tagged_fields", None)
    if unknown:
        out["unknown_tagged_fields"] = [(tag, bytes(data)) for tag, data in unknown]
    return (type(obj).__name__, out)


def message_value_of(value: Any) -> Any:
    if isinstance(value, list):
        return [message_value_of(v) for v in value]
    if hasattr(type(value), "FIELDS"):
        return message_value(value)
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return ("float", struct.pack(">d", value)) if math.isnan(value) else value
    raw = getattr(value, "raw", None)
    if raw is not None and not isinstance(value, (bytes, bytearray)):
        return ("records", bytes(raw))
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def is_flexible(cls: Any, version: int) -> bool:
    """Whether ``version`` of message class ``cls`` uses the flexible (KIP-482) encoding."""
    flexible = getattr(cls, "FLEXIBLE_VERSIONS", None)
    return flexible is not None and flexible[0] <= version <= flexible[1]


def check_reencoding(
    original: bytes,
    encoded: bytes,
    encode_again: Callable[[], bytes],
    *,
    flexible: bool,
    what: str,
    data: Optional[bytes] = None,
) -> None:
    """What decodes re-encodes to the very same bytes -- in classic versions, where every value has one
    encoding.  Flexible versions admit several encodings of one value (a tagged field written with its
    default value, which an encoder leaves out), so there the oracle is that the re-encoding is a fixed
    point: decoding and encoding it again gives it back."""
    if not flexible:
        if encoded != original:
            raise fail(
                f"{what}: re-encoded bytes differ from the input:\n  input:      {original[:200].hex()}\n"
                f"  re-encoded: {encoded[:200].hex()}",
                data,
            )
        return
    again = encode_again()
    if again != encoded:
        raise fail(
            f"{what}: re-encoding is not a fixed point:\n  first:  {encoded[:200].hex()}\n"
            f"  second: {again[:200].hex()}",
            data,
        )
