"""The ``group_events`` and ``rebalances`` tables: consumer groups of captures, on Spark or in one process.

Why per coordinator: a group's protocol exchanges all go to its coordinator, from every member's own
connection, so the analysis (:mod:`kproto.capture.groups`) needs all the connections to one broker
together, and nothing else.  On Spark the stage 1 rows of :mod:`kproto.spark.capture_stages` (one per
connection and range) are therefore keyed by their **server endpoint** -- the endpoint on a Kafka port
(``ports``), else the one with the lower port number (clients use high ephemeral ports) -- shuffled by
that key, and each task decodes its connections one at a time, keeps their group exchanges, and analyses
each coordinator's set when its rows are done.  The single-process twin (:func:`group_tables_local`)
decodes every file in one pass and analyses the group exchanges of each server endpoint the same way,
so the two give the same rows (``tests/test_groups_spark.py`` compares them).

Rows are sorted (group, times, member) so that they do not depend on the order of tasks.  Unknown
times and durations stay null.
"""

from __future__ import annotations

from typing import Any, Collection, Dict, Iterable, Iterator, List, Optional, Tuple

import pyarrow as pa

from kproto.capture.conversation import DEFAULT_PORTS, Exchange, KafkaConversations
from kproto.capture.groups import GROUP_APIS, GroupAnalyzer, GroupReport
from kproto.capture.packets import TcpSegment
from kproto.capture.reader import CaptureReader
from kproto.capture.reassembly import TcpReassembler
from kproto.spark.batches import ns_to_us
from kproto.spark.inputs import capture_order_key, first_packet_time, list_local_files
from kproto.spark.schema import TIME

__all__ = [
    "GROUP_EVENTS",
    "REBALANCES",
    "GROUP_TABLES",
    "group_rows",
    "group_tables_local",
    "group_tables",
    "server_key",
]

#: One row per group-protocol exchange.
GROUP_EVENTS = pa.schema(
    [
        ("group_id", pa.string()),
        ("member_id", pa.string()),
        ("generation", pa.int32()),  # the request's generation (JoinGroup: the answer's); KIP-848: member epoch
        ("api_name", pa.string()),
        ("outcome", pa.string()),  # "NONE" when it succeeded, the error's name otherwise, null when unanswered
        ("time", TIME),
        ("response_time", TIME),
        ("client_id", pa.string()),
        ("client", pa.string()),
        ("coordinator", pa.string()),
    ]
)

#: One row per generation (the outcome of one rebalance).
REBALANCES = pa.schema(
    [
        ("group_id", pa.string()),
        ("generation", pa.int32()),
        ("previous_generation", pa.int32()),
        ("start", TIME),  # first JoinGroup of the generation; null when the capture does not show it
        ("end", TIME),  # last SyncGroup answer; null when unknown
        ("duration_ms", pa.float64()),
        ("members", pa.int32()),
        ("leader", pa.string()),
        ("protocol", pa.string()),
        ("waited_for", pa.string()),  # the member the rebalance waited for longest
        ("waited_ms", pa.float64()),
        ("expired", pa.list_(pa.string())),
        ("left", pa.list_(pa.string())),
        ("problems", pa.list_(pa.string())),
        ("coordinator", pa.string()),
    ]
)

GROUP_TABLES = {"group_events": GROUP_EVENTS, "rebalances": REBALANCES}


def group_rows(reports: Iterable[GroupReport]) -> Tuple[List[Tuple[Any, ...]], List[Tuple[Any, ...]]]:
    """``(group_events rows, rebalances rows)`` of analysed groups, sorted."""
    events: List[Tuple[Any, ...]] = []
    rebalances: List[Tuple[Any, ...]] = []
    for report in reports:
        for e in report.events:
            events.append(
                (
                    e.group_id,
                    e.member_id,
                    e.generation,
                    e.api,
                    e.error,
                    ns_to_us(e.request_time_ns),
                    ns_to_us(e.response_time_ns),
                    e.client_id,
                    e.client,
                    e.coordinator,
                )
            )
        previous: Optional[int] = None
        for g in report.generations:
            slowest = g.slowest
            rebalances.append(
                (
                    report.group_id,
                    g.generation_id,
                    previous,
                    ns_to_us(g.start_ns),
                    ns_to_us(g.end_ns),
                    g.duration_ms,
                    len(g.members),
                    g.leader,
                    g.protocol,
                    slowest.member_id if slowest else None,
                    slowest.waited_ms if slowest else None,
                    list(g.expired),
                    list(g.left),
                    list(g.problems) + list(report.problems),
                    report.coordinator,
                )
            )
            previous = g.generation_id
    events.sort(key=lambda r: (r[0], r[9], r[5] or 0, r[8] or "", r[3], r[1] or ""))
    rebalances.sort(key=lambda r: (r[0], r[14], r[1]))
    return events, rebalances


def _tables(events: List[Tuple[Any, ...]], rebalances: List[Tuple[Any, ...]]) -> Dict[str, pa.Table]:
    def table(rows: List[Tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
        columns: List[Any] = list(zip(*rows)) if rows else [[] for _ in schema]
        return pa.table([pa.array(list(c), f.type) for c, f in zip(columns, schema)], schema=schema)

    return {"group_events": table(events, GROUP_EVENTS), "rebalances": table(rebalances, REBALANCES)}


class _CoordinatorSets:
    """Group exchanges of decoded records, one analyzer per server endpoint."""

    def __init__(self) -> None:
        self.analyzers: Dict[str, GroupAnalyzer] = {}

    def feed(self, records: Iterable[Any]) -> None:
        for record in records:
            if type(record) is Exchange and record.api_key in GROUP_APIS:
                server = str(record.server)
                analyzer = self.analyzers.get(server)
                if analyzer is None:
                    analyzer = self.analyzers[server] = GroupAnalyzer()
                analyzer.feed(record)

    def reports(self) -> List[GroupReport]:
        return [report for server in sorted(self.analyzers) for report in self.analyzers[server].finish()]


def group_tables_local(
    inputs: Iterable[str], *, ports: Collection[int] = DEFAULT_PORTS, detect: bool = True, glob: Optional[str] = None
) -> Dict[str, pa.Table]:
    """``{"group_events": ..., "rebalances": ...}`` of the captures under ``inputs``, in one process."""
    files = list_local_files(inputs, glob)
    files.sort(key=lambda f: capture_order_key(first_packet_time(f), f))
    reassembler = TcpReassembler()
    conversations = KafkaConversations(ports=ports, detect=detect)
    sets = _CoordinatorSets()
    for file in files:
        for item in CaptureReader(file):
            if type(item) is TcpSegment:
                reassembler.feed(item)
                for event in reassembler.events():
                    conversations.feed(event)
                sets.feed(conversations.records())
    reassembler.finish()
    for event in reassembler.events():
        conversations.feed(event)
    conversations.finish()
    sets.feed(conversations.records())
    return _tables(*group_rows(sets.reports()))


def server_key(lo_ip: str, lo_port: int, hi_ip: str, hi_port: int, ports: Collection[int]) -> str:
    """The server endpoint of a connection key (see the module docs)."""
    lo_server = lo_port in ports
    if lo_server != (hi_port in ports):
        return f"{lo_ip}:{lo_port}" if lo_server else f"{hi_ip}:{hi_port}"
    return f"{lo_ip}:{lo_port}" if lo_port <= hi_port else f"{hi_ip}:{hi_port}"


# --- Spark ---------------------------------------------------------------------------------------------------

#: Stage 2 output: a row of one of the two tables in its own struct column, the other null.
_UNION = pa.schema([(name, pa.struct(list(schema))) for name, schema in GROUP_TABLES.items()])


class _KeyByServer:
    """Stage 1 for group tables: the capture stages' segment rows with their server key added."""

    def __init__(self, ports: Collection[int]) -> None:
        self.ports = frozenset(ports)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from kproto.spark.capture_plan import CaptureRange
        from kproto.spark.capture_stages import extract_segments

        for batch in batches:
            for row in batch.to_pylist():
                for segments in extract_segments(CaptureRange(**row)):
                    keys = [
                        None if lo is None else server_key(lo, lp, hi, hp, self.ports)
                        for lo, lp, hi, hp in zip(
                            *(segments.column(n).to_pylist() for n in ("lo_ip", "lo_port", "hi_ip", "hi_port"))
                        )
                    ]
                    yield segments.append_column("server_key", pa.array(keys, pa.string()))


class _AnalyseCoordinators:
    """Stage 2 for group tables: rows sorted by server key, connection key, reading order in; each
    connection decoded alone, each server key's groups analysed when its rows end; table rows out."""

    def __init__(self, ports: Collection[int], detect: bool) -> None:
        self.ports = frozenset(ports)
        self.detect = detect

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from kproto.spark.capture_stages import _unpack  # the stage 1 row format's own reader

        sets = _CoordinatorSets()
        server: Any = None
        key: Any = None
        reassembler: Optional[TcpReassembler] = None
        conversations: Optional[KafkaConversations] = None

        def close_connection() -> None:
            if reassembler is not None and conversations is not None:
                reassembler.finish()
                for event in reassembler.events():
                    conversations.feed(event)
                conversations.finish()
                sets.feed(conversations.records())

        for batch in batches:
            names = ("server_key", "lo_ip", "lo_port", "hi_ip", "hi_port", "diagnostic")
            columns = [batch.column(n).to_pylist() for n in names]
            records, payloads = batch.column("segments"), batch.column("payloads")
            for i, (skey, lo_ip, lo_port, hi_ip, hi_port, diagnostic) in enumerate(zip(*columns)):
                if diagnostic is not None or skey is None:
                    continue
                row_key = (lo_ip, lo_port, hi_ip, hi_port)
                if row_key != key:
                    close_connection()
                    if skey != server:
                        yield from self._emit(sets)
                        sets = _CoordinatorSets()
                        server = skey
                    key = row_key
                    reassembler = TcpReassembler()
                    conversations = KafkaConversations(ports=self.ports, detect=self.detect)
                assert reassembler is not None and conversations is not None
                for segment in _unpack(lo_ip, lo_port, hi_ip, hi_port, records[i].as_py(), payloads[i].as_py(), 0):
                    reassembler.feed(segment)
                    for event in reassembler.events():
                        conversations.feed(event)
                sets.feed(conversations.records())
        close_connection()
        yield from self._emit(sets)

    @staticmethod
    def _emit(sets: _CoordinatorSets) -> Iterator[pa.RecordBatch]:
        events, rebalances = group_rows(sets.reports())
        if not events and not rebalances:
            return
        columns = []
        for name, rows in (("group_events", events), ("rebalances", rebalances)):
            names = GROUP_TABLES[name].names
            mine = [dict(zip(names, row)) for row in rows]
            other = len(rebalances) if name == "group_events" else len(events)
            items = mine + [None] * other if name == "group_events" else [None] * other + mine
            columns.append(pa.array(items, _UNION.field(name).type))
        yield pa.RecordBatch.from_arrays(columns, schema=_UNION)


def group_tables(
    spark: Any,
    inputs: Iterable[str],
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    glob: Optional[str] = None,
    partitions: Optional[int] = None,
) -> Dict[str, Any]:
    """``{"group_events": DataFrame, "rebalances": DataFrame}`` of the captures under ``inputs``, computed
    on Spark per coordinator connection set (see the module docs).  Lazy until written or collected; the
    decode runs once for both (their common parent is persisted: ``unpersist()`` either when done)."""
    from kproto.spark.capture_stages import CONNECTION_KEY, READING_ORDER, SEGMENTS
    from kproto.spark.capture_tables import RANGES, plan_capture_ranges
    from kproto.spark.schema import spark_schema

    ranges = plan_capture_ranges(spark, inputs, glob=glob)
    sc = spark.sparkContext
    plan = spark.createDataFrame(sc.parallelize([tuple(r) for r in ranges], max(1, len(ranges))), spark_schema(RANGES))
    keyed = SEGMENTS.append(pa.field("server_key", pa.string()))
    segments = plan.mapInArrow(_KeyByServer(ports), spark_schema(keyed))
    count = partitions or 2 * max(1, sc.defaultParallelism)
    ordered = segments.repartition(count, "server_key").sortWithinPartitions(
        "server_key", *CONNECTION_KEY, *READING_ORDER
    )
    union = ordered.mapInArrow(_AnalyseCoordinators(ports, detect), spark_schema(_UNION)).persist()
    return {name: union.where(union[name].isNotNull()).select(f"{name}.*") for name in GROUP_TABLES}
