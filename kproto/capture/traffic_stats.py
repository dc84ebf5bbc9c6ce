"""Traffic of a capture over time in bounded memory: request rate and latency per API, bytes and records
per topic, error counts -- what ``kproto report`` plots.

Why a separate aggregation: a report of a 1 GB capture must not hold (or plot) every exchange.  Exchanges
are counted into one-second cells as they are read; :meth:`TrafficStats.series` then merges the cells
into at most ``max_buckets`` equal buckets over the capture's span, so the plotted size depends on the
bucket count and the number of APIs, topics and error kinds, not on the capture's size.

Latency percentiles come from a histogram per cell with :data:`BINS_PER_DECADE` logarithmic bins from
1 µs to 1000 s: a percentile is the upper edge of the bin it falls in, so it is exact to within one bin
(about 12 % at 20 bins a decade), and merging cells is adding counts.

Records are counted from the record sets of Produce requests and Fetch responses (magic 2 batch headers
give their count without decompressing; magic 0/1 sets are decoded); a record set that does not decode
counts its bytes and no records.  Topics of Fetch v13+ and Produce v13 are named by id (``topic_id``):
the capture's Metadata answers give their names (:class:`~kproto.capture.topic_names.TopicNames`), so a
topic is one series however it was named; an id no Metadata answer names stays ``topic id <id>``.

Answers that are steps of the group protocol rather than failures (:data:`~kproto.capture.groups.
PROTOCOL_STEPS`: a first JoinGroup answered MEMBER_ID_REQUIRED, a Heartbeat answered
REBALANCE_IN_PROGRESS) are not counted as errors.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, DefaultDict, Dict, Iterable, List, Optional, Set, Tuple

from kproto.capture.conversation import Exchange, Problem, Record
from kproto.capture.groups import PROTOCOL_STEPS, error_name
from kproto.capture.topic_names import TopicNames
from kproto.message_facts import message_facts
from kproto.errors import KprotoError

__all__ = ["TrafficStats", "Series", "BINS_PER_DECADE", "DEFAULT_MAX_BUCKETS", "percentile"]

#: Latency histogram resolution (bins per factor of ten).
BINS_PER_DECADE = 20
_LOWEST_NS = 1_000  # 1 µs
_BINS = BINS_PER_DECADE * 9 + 1  # 1 µs .. 1000 s, and one bin above
#: Buckets a series is merged into at most.
DEFAULT_MAX_BUCKETS = 240

PRODUCE, FETCH = 0, 1


def _bin(latency_ns: int) -> int:
    if latency_ns <= _LOWEST_NS:
        return 0
    return min(_BINS - 1, int(math.log10(latency_ns / _LOWEST_NS) * BINS_PER_DECADE) + 1)


def _bin_upper_ms(index: int) -> float:
    return _LOWEST_NS * 10 ** (index / BINS_PER_DECADE) / 1e6


def percentile(histogram: Dict[int, int], q: float) -> Optional[float]:
    """The ``q`` quantile (0..1) of a latency histogram, in ms (None when it is empty)."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = q * total
    seen = 0
    for index in sorted(histogram):
        seen += histogram[index]
        if seen >= rank:
            return _bin_upper_ms(index)
    return _bin_upper_ms(max(histogram))


@dataclass
class Series:
    """Bucketed series: bucket start times (ns) and, per name, one value per bucket."""

    bucket_ns: int
    starts_ns: List[int]
    values: Dict[str, List[Optional[float]]] = field(default_factory=dict)


class TrafficStats:
    """Counts exchanges and problems per second (:meth:`feed`), then gives bucketed series."""

    def __init__(self) -> None:
        self.requests: DefaultDict[Tuple[int, str], int] = defaultdict(int)
        self.latency: DefaultDict[Tuple[int, str], Dict[int, int]] = defaultdict(dict)
        self.topic_bytes: DefaultDict[Tuple[int, str], int] = defaultdict(int)
        self.topic_records: DefaultDict[Tuple[int, str], int] = defaultdict(int)
        self.errors: DefaultDict[Tuple[int, str], int] = defaultdict(int)
        self.steps: DefaultDict[Tuple[int, str], int] = defaultdict(int)  # answers that are protocol steps
        self.first_s: Optional[int] = None
        self.last_s: Optional[int] = None
        self.exchanges = 0
        self.problems = 0
        self.topic_names = TopicNames()
        self._by_id: Set[str] = set()  # topic keys that are ids (as text)

    def feed(self, record: Record) -> None:
        """One record of :func:`~kproto.capture.conversation.decode_capture`."""
        if isinstance(record, Problem):
            self.problems += 1
            if record.timestamp_ns is not None:
                self.errors[(self._second(record.timestamp_ns), f"capture: {record.kind.value}")] += 1
            return
        if not isinstance(record, Exchange) or record.request_time_ns is None:
            return
        self.exchanges += 1
        self.topic_names.feed(record)
        second = self._second(record.request_time_ns)
        api = record.api_name
        self.requests[(second, api)] += 1
        latency = record.latency_ns
        if latency is not None and latency >= 0:
            cell = self.latency[(second, api)]
            b = _bin(latency)
            cell[b] = cell.get(b, 0) + 1
        if record.response is not None:
            facts = message_facts(None, record.response, record.api_version)
            for code in sorted(facts.error_codes):
                if (api, error_name(code)) in PROTOCOL_STEPS:
                    self.steps[(second, f"{api} {error_name(code)}")] += 1
                    continue
                self.errors[(second, f"{api} {error_name(code)}")] += 1
        if record.api_key == PRODUCE and record.request is not None:
            self._record_sets(second, record.request, "topic_data", "name", "partition_data", record.api_version)
        elif record.api_key == FETCH and record.response is not None:
            self._record_sets(second, record.response, "responses", "topic", "partitions", record.api_version)

    def _second(self, ns: int) -> int:
        second = ns // 1_000_000_000
        self.first_s = second if self.first_s is None else min(self.first_s, second)
        self.last_s = second if self.last_s is None else max(self.last_s, second)
        return second

    def _record_sets(
        self, second: int, message: Any, topics_field: str, name_field: str, parts_field: str, version: int
    ) -> None:
        for topic in getattr(message, topics_field, None) or []:
            name = getattr(topic, name_field, None)
            if not name:
                name = str(getattr(topic, "topic_id", "") or "?")
                self._by_id.add(name)
            for part in getattr(topic, parts_field, None) or []:
                records = getattr(part, "records", None)
                if records is None or not len(records):
                    continue
                self.topic_bytes[(second, name)] += len(records)
                try:
                    self.topic_records[(second, name)] += len(records.records(check_crc=False))
                except (KprotoError, AttributeError):
                    pass

    # --- output -----------------------------------------------------------------------------------------

    def bucket_ns(self, max_buckets: int = DEFAULT_MAX_BUCKETS) -> int:
        """The bucket width (whole seconds) that fits the capture's span into ``max_buckets``."""
        if self.first_s is None or self.last_s is None:
            return 1_000_000_000
        span = self.last_s - self.first_s + 1
        return max(1, math.ceil(span / max_buckets)) * 1_000_000_000

    def _buckets(self, max_buckets: int) -> Tuple[int, List[int]]:
        width = self.bucket_ns(max_buckets)
        if self.first_s is None or self.last_s is None:
            return width, []
        first = self.first_s * 1_000_000_000
        count = (self.last_s * 1_000_000_000 - first) // width + 1
        return width, [first + i * width for i in range(count)]

    def _index(self, second: int, width: int) -> int:
        assert self.first_s is not None
        return (second - self.first_s) * 1_000_000_000 // width

    def topic_label(self, key: str) -> str:
        """A topic's series name: its name, also for a key that is a topic id a Metadata answer named."""
        if key not in self._by_id:
            return key
        name = self.topic_names.resolve(key)
        return name if name != key else f"topic id {key}"

    def _sum_series(
        self, cells: Dict[Tuple[int, str], int], max_buckets: int, scale: float = 1.0, topics: bool = False
    ) -> Series:
        width, starts = self._buckets(max_buckets)
        series = Series(width, starts)
        for (second, key), count in cells.items():
            name = self.topic_label(key) if topics else key
            row = series.values.setdefault(name, [0.0] * len(starts))
            i = self._index(second, width)
            row[i] = (row[i] or 0.0) + count * scale
        series.values = dict(sorted(series.values.items()))
        return series

    def request_rate(self, max_buckets: int = DEFAULT_MAX_BUCKETS) -> Series:
        """Requests per second per API."""
        width = self.bucket_ns(max_buckets)
        return self._sum_series(self.requests, max_buckets, 1e9 / width)

    def latency_percentiles(
        self, quantiles: Iterable[float] = (0.5, 0.99), max_buckets: int = DEFAULT_MAX_BUCKETS
    ) -> Series:
        """Latency quantiles per API and bucket, in ms; names are ``"<api> p50"`` etc."""
        width, starts = self._buckets(max_buckets)
        merged: Dict[Tuple[int, str], Dict[int, int]] = {}
        for (second, api), cell in self.latency.items():
            target = merged.setdefault((self._index(second, width), api), {})
            for b, n in cell.items():
                target[b] = target.get(b, 0) + n
        series = Series(width, starts)
        qs = list(quantiles)
        for (i, api), histogram in sorted(merged.items()):
            for q in qs:
                row = series.values.setdefault(f"{api} p{round(q * 100)}", [None] * len(starts))
                row[i] = percentile(histogram, q)
        series.values = dict(sorted(series.values.items()))
        return series

    def topic_bytes_series(self, max_buckets: int = DEFAULT_MAX_BUCKETS) -> Series:
        """Record-set bytes per topic and bucket."""
        return self._sum_series(self.topic_bytes, max_buckets, topics=True)

    def topic_records_series(self, max_buckets: int = DEFAULT_MAX_BUCKETS) -> Series:
        """Records per topic and bucket."""
        return self._sum_series(self.topic_records, max_buckets, topics=True)

    def error_series(self, max_buckets: int = DEFAULT_MAX_BUCKETS) -> Series:
        """Error responses (``"<api> <error>"``) and capture problems per bucket."""
        return self._sum_series(self.errors, max_buckets)

    def protocol_step_series(self, max_buckets: int = DEFAULT_MAX_BUCKETS) -> Series:
        """Answers with an error code that are steps of the group protocol (``"<api> <error>"``) per bucket."""
        return self._sum_series(self.steps, max_buckets)
