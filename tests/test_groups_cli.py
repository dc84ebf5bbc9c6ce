"""``kproto groups`` and ``kproto report`` through the CLI's entry point (in process)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kproto.cli import main
from test_groups_analysis import SAMPLES, modern_capture

SAMPLE = str(SAMPLES / "consumer_group.pcapng")


def test_groups_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["groups", SAMPLE]) == 0
    out = capsys.readouterr().out
    assert out.startswith("group billing  coordinator 10.0.0.10:9092  members 2  generations 2\n")
    assert "  generation 2: 2016-01-05 13:20:06.584 -> 2016-01-05 13:20:06.834  duration 250.0 ms" in out
    assert "    waited for billing-consumer-1-6a1c-41f2: 224.0 ms (rejoined late)" in out
    assert "    assigned billing-consumer-2-9b7e-02aa: orders[1]" in out
    assert "commit refused orders[1]=10 by billing-consumer-2-9b7e-02aa (generation 1): ILLEGAL_GENERATION" in out


def test_groups_json_and_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = str(modern_capture(tmp_path))
    assert main(["groups", "--format", "json", capture]) == 0
    document = json.loads(capsys.readouterr().out)
    groups = {r["group_id"]: r for r in document["records"]}
    assert set(groups) == {"kip848", "shipping"}
    (dup,) = groups["shipping"]["generations"][1]["duplicates"]
    assert dup["records"] == 20 and dup["new_owner"] == "shipper-y-2222"
    assert groups["kip848"]["epochs"][0]["member_epoch"] == 1
    assert document["summary"] == {"groups": 2, "generations": 2, "problems": 0}
    assert main(["groups", "--format", "jsonl", "--group", "shipping", capture]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["record"] for line in lines] == ["group", "summary"]
    assert lines[0]["generations"][1]["slowest_member"] == "shipper-x-1111"


def test_groups_without_group_traffic(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["groups", str(SAMPLES / "produce.pcap")]) == 0
    assert capsys.readouterr().out == "no consumer group traffic in the capture\n"


def test_report_without_plotly_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    out = tmp_path / "r.html"
    assert main(["report", SAMPLE, "-o", str(out)]) == 2
    assert "pip install 'kproto[report]'" in capsys.readouterr().err
    assert not out.exists()
