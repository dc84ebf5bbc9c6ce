"""How closely the mock broker answers like Apache Kafka: the corpus of kproto.testing.fidelity_scenarios
sent to Kafka 3.9 (the 0.8/0.9 request versions and the classic group coordinator, with timing) and to
Kafka 4.1 (modern versions and the golden traffic of clients at their defaults), and to a MockBroker
each time; answers compared field by field after normalising what legitimately differs.

    .venv/bin/python benchmarks/fidelity.py                       # starts Kafka 3.9.1, then 4.1.1
    .venv/bin/python benchmarks/fidelity.py --only 4.1            # one release line
    .venv/bin/python benchmarks/fidelity.py --differences diff.json  # every differing field, as JSON

Prints, per api, the fields compared and those that agree, then every difference, marked with the
docs/broker.md entry that documents it (or UNDOCUMENTED), and saves the counts as
``benchmarks/results/fidelity.json`` (rendered into docs/benchmarks.md).  Exits 1 when a difference is
undocumented.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kproto.testing import fidelity as fid  # noqa: E402
from results import Run, add_json_out  # noqa: E402
from kproto.testing.fidelity_scenarios import GROUP_SCENARIOS, SCENARIOS, golden_scenarios  # noqa: E402

RELEASES = {"3.9": "3.9.1", "4.1": "4.1.1"}


@contextlib.contextmanager
def kafka_target(line: str) -> Iterator[fid.Target]:
    from kproto.testing.apache_kafka import ApacheKafka

    with ApacheKafka(RELEASES[line], broker_config=fid.KAFKA_CONFIG) as kafka:
        yield fid.kafka_target(kafka.address(kafka.node_ids[0]), kafka.create_topic)


def corpus(line: str) -> List[fid.Scenario]:
    everything = SCENARIOS + GROUP_SCENARIOS + golden_scenarios(ROOT / "tests" / "golden" / "clients")
    return [s for s in everything if s.kafka == line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(RELEASES), help="one release line")
    parser.add_argument("--differences", type=Path, help="write every differing field here as JSON")
    add_json_out(parser)
    args = parser.parse_args()
    record = Run("fidelity")
    total = fid.Comparison()
    seconds: Dict[str, float] = {}
    for line in sorted(RELEASES):
        if args.only and line != args.only:
            continue
        t0 = time.monotonic()
        with kafka_target(line) as kafka, fid.comparable_mock() as broker:
            result = fid.run_and_compare(corpus(line), kafka, fid.mock_target(broker))
        seconds[line] = round(time.monotonic() - t0, 1)
        total.add(result)
    print(f"{'api':<20} {'agree':>7} / {'compared':<8}")
    for api in sorted(total.compared):
        print(f"{api:<20} {total.agreed.get(api, 0):>7} / {total.compared[api]:<8}")
    print(f"{'all':<20} {sum(total.agreed.values()):>7} / {sum(total.compared.values()):<8}")
    print()
    open_ones = fid.undocumented(total.differences)
    for d in total.differences:
        doc = next((doc.name for doc in fid.DOCUMENTED if doc.matches(d)), "UNDOCUMENTED")
        print(
            f"[{doc}] {d.scenario} {d.label} {d.api} v{d.version} {d.path}: "
            f"kafka={str(d.kafka)[:80]} mock={str(d.mock)[:80]}"
        )
    print(
        f"\n{len(total.differences)} differing fields, {len(open_ones)} undocumented; "
        f"{len({d.name for d in fid.DOCUMENTED})} documented differences; seconds per release line: {seconds}"
    )
    seen = fid.documented_seen(total.differences)
    for api in sorted(total.compared):
        record.add(kind="api", name=api, agreed=total.agreed.get(api, 0), compared=total.compared[api])
    for name in sorted(seen):
        record.add(kind="documented", name=name, agreed=None, compared=seen[name])
    record.settings = {
        "releases": [RELEASES[line] for line in sorted(seconds)],
        "seconds": seconds,
        "undocumented": len(open_ones),
    }
    record.save(args.json_out)
    if args.differences:
        report = total.to_json()
        report["documented_seen"] = seen
        args.differences.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 1 if open_ones else 0


if __name__ == "__main__":
    sys.exit(main())
