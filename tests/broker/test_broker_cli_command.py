"""``kproto broker`` as a process: announce line, topics, recording, clean exit on SIGTERM."""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker_client import SocketClient, metadata_request
from kproto.broker import cli_command
from kproto.capture.conversation import Exchange, decode_capture

RUNNER = (
    "import argparse, sys\n"
    "from kproto.broker import cli_command\n"
    "parser = argparse.ArgumentParser()\n"
    "cli_command.add_arguments(parser)\n"
    "sys.exit(cli_command.run(parser.parse_args(sys.argv[1:])))\n"
)


def test_broker_process_announces_serves_and_records(tmp_path: Path) -> None:
    record = tmp_path / "broker.pcap"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            RUNNER,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--topic",
            "orders:3",
            "--topic",
            "audit",
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        match = re.fullmatch(r"listening on (127\.0\.0\.1):(\d+)", line)
        assert match, line
        port = int(match.group(2))
        with SocketClient(("127.0.0.1", port)) as client:
            topics = client.request(metadata_request()).topics
            assert {t.name: len(t.partitions) for t in topics} == {"orders": 3, "audit": 1}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    exchanges = [r for r in decode_capture(str(record), ports={port}) if isinstance(r, Exchange)]
    assert [(e.api_name, e.answered) for e in exchanges] == [("Metadata", True)]


def test_bad_topic_spec_is_an_argument_error() -> None:
    parser = argparse.ArgumentParser()
    cli_command.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--topic", "name:zero"])
    assert parser.parse_args(["--topic", "a:2", "--port", "0"]).topic == ["a:2"]


def test_sasl_user_option_is_checked() -> None:
    import argparse

    from kproto.broker.cli_command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--sasl-plain-user", "alice:s3:cret"]).sasl_plain_user == ["alice:s3:cret"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--sasl-plain-user", "no-password"])


def test_broker_process_with_three_brokers_announces_a_bootstrap_list() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, "--port", "0", "--brokers", "3", "--topic", "t:6"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        match = re.fullmatch(r"listening on ((?:127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+)", line)
        assert match, line
        ports = [int(a.rsplit(":", 1)[1]) for a in match.group(1).split(",")]
        with SocketClient(("127.0.0.1", ports[2])) as client:
            meta = client.request(metadata_request("t"), 1)
        assert sorted(b.port for b in meta.brokers) == sorted(ports)
        assert {p.leader_id for p in meta.topics[0].partitions} == {0, 1, 2}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_a_replication_factor_above_the_brokers_is_refused(capsys: pytest.CaptureFixture) -> None:
    parser = argparse.ArgumentParser()
    cli_command.add_arguments(parser)
    assert cli_command.run(parser.parse_args(["--brokers", "2", "--replication-factor", "3"])) == 2
    assert "--replication-factor" in capsys.readouterr().err
