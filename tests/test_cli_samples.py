"""The committed sample data is what ``samples/make_samples.py`` generates, deterministically, and small."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_cli_usage import SAMPLES

GENERATED = ("produce.pcap", "fetch.pcap", "consumer_group.pcapng", "controlled_shutdown.pcap", "frames.hex")


def generate(out_dir: Path) -> None:
    subprocess.run(
        [sys.executable, str(SAMPLES / "make_samples.py"), str(out_dir)], check=True, capture_output=True, timeout=300
    )


def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path: Path) -> None:
    generate(tmp_path / "a")
    generate(tmp_path / "b")
    for name in GENERATED:
        first = (tmp_path / "a" / name).read_bytes()
        assert first == (tmp_path / "b" / name).read_bytes(), f"{name} differs between two runs"
        assert first == (SAMPLES / name).read_bytes(), (
            f"samples/{name} is stale: run `python samples/make_samples.py` and commit the result"
        )


def test_samples_are_small_and_documented() -> None:
    total = sum(p.stat().st_size for p in SAMPLES.iterdir() if p.is_file())
    assert total < 200 * 1024
    readme = (SAMPLES / "README.md").read_text()
    for name in GENERATED + ("make_samples.py",):
        assert f"`{name}`" in readme
