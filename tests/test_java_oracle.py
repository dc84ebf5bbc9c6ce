"""kproto against Apache Kafka's own serializers (the generated ``*Data`` classes of kafka-clients).

For every api key and version a kafka-clients release knows, requests and responses alike, on a few
hypothesis-drawn values, the "full" value (every optional part present) and the default value:

(a) Kafka reads kproto's encoding, all of it, and writes it back byte for byte;
(b) Kafka's JSON form of what it read equals kproto's ``to_dict()`` under the documented mapping
    (``docs/java-oracle.md``);
(c) Kafka's encoding of the same value built from that JSON, and of its default message, decodes in
    kproto to the same values (and is kproto's encoding).

An unknown tagged field survives both.  Bad input goes to both sides too: truncations and byte mutations
of kproto's encodings, and the bodies of the fuzz corpora's request and response frames.  Where Kafka's
reader refuses a frame kproto raises :class:`kproto.DecodeError`; where Kafka accepts it, kproto decodes
the same values — except for the documented differences in ``TOLERATED_BY_KAFKA``.

Releases: the newest 3.9 (the versions 4.0 removed), 4.0 (the early-access share-group v0) and the
newest 4.x.  Each runs as one JVM that answers every case of a phase in one round trip.
``test_every_version_kafka_knows_was_compared`` fails when a (api, version, direction) a release knows
was not compared; the versions newer than kproto's specs are pinned in ``BEYOND_KPROTO``.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

import kproto
from kproto.framing import check_frame, decode_request_header
from kproto.messages import ResponseHeader
from kproto.testing import jars
from message_strategies import full_value, message_class, message_values, spec_versions
from peers.kafka_java import KafkaJava, Names, all_pairs, default_case, diff, json_case, read_case, to_kafka_json

pytestmark = [pytest.mark.real_clients, pytest.mark.java_oracle]


def _java_missing(exc: Exception) -> None:
    # The CI machine has a JDK and Maven (scripts/test installs them): there the tests must run.
    if os.environ.get("CI"):
        pytest.fail(f"the Java oracle needs a JDK and Maven: {exc}", pytrace=False)
    pytest.skip(f"the Java oracle needs a JDK and Maven: {exc}", allow_module_level=True)


try:
    jars.require_tool("java"), jars.require_tool("javac")
except jars.JavaToolMissingError as _exc:
    _java_missing(_exc)

#: kafka-clients releases compared, oldest first.
RELEASES = ("3.9.2", "4.0.2", "4.4.0")
#: Hypothesis draws per (message, version), besides the full and the default value.
DRAWS = int(os.environ.get("KPROTO_ORACLE_EXAMPLES", "3"))
#: One seed, so that a run is repeatable (CI included); KPROTO_ORACLE_SEED=random explores new values, and
#: the seed a failing run used is in its report.
_SEED_SETTING = os.environ.get("KPROTO_ORACLE_SEED", "402639899")
SEED = random.randrange(1 << 30) if _SEED_SETTING == "random" else int(_SEED_SETTING)

#: (api key, direction, version) the newest release knows and kproto's specs (Kafka 4.1) do not have.
BEYOND_KPROTO = {
    (18, "request", 5),
    (18, "response", 5),  # ApiVersions v5
    (28, "request", 6),
    (28, "response", 6),  # TxnOffsetCommit v6
    (42, "request", 3),
    (42, "response", 3),  # DeleteGroups v3
    (88, "request", 1),
    (88, "response", 1),  # StreamsGroupHeartbeat v1
    (89, "request", 1),
    (89, "response", 1),  # StreamsGroupDescribe v1
    (93, "request", 0),
    (93, "response", 0),  # StreamsGroupTopologyDescriptionUpdate
    (94, "request", 0),
    (94, "response", 0),  # UnregisterController
}

#: (release, api key, direction, version) whose layout in that release is an early-access one that a later
#: release replaced under the same version number; kproto has the later layout (specs/README.md).  Each is
#: checked to still disagree, and the newest release compares it.
EARLY_ACCESS = {
    ("3.9.2", 87, "response", 0),
    ("4.0.2", 87, "response", 0),  # ReadShareGroupStateSummary before LeaderEpoch
}

#: A root tag section with one field Kafka does not know: tag 10000, two bytes.
UNKNOWN_TAG = b"\x01\x90\x4e\x02ab"
CORPUS = Path(__file__).resolve().parent.parent / "fuzz" / "corpus"
SPECS = {(spec.api_key, spec.kind, v): spec for spec, v in spec_versions() if spec.kind in ("request", "response")}


def _draw(spec: Any, version: int, n: int) -> List[Any]:
    """``n`` hypothesis draws of ``spec`` at ``version`` (fewer if hypothesis finds fewer distinct ones)."""
    out: List[Any] = []

    @seed(SEED + spec.api_key * 1000 + version * 2 + (spec.kind == "response"))
    @settings(
        max_examples=n, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )
    @given(message_values(spec, version))
    def collect(msg: Any) -> None:
        out.append(msg)

    collect()
    return out


class Run:
    """Everything one release said about every case, gathered in a few round trips."""

    def __init__(self, release: str, tmp: Any) -> None:
        self.kafka_version = release
        started = time.monotonic()
        oracle = KafkaJava(release, tmp)
        try:
            self.known = set(all_pairs(oracle.messages()))
            self.early = sorted(k for k in self.known if (release, *k) in EARLY_ACCESS)
            self.compared = sorted(k for k in self.known if k in SPECS and k not in self.early)
            self.early_results = oracle.run(
                [read_case(*k, full_value(SPECS[k], k[2]).encode(k[2])) for k in self.early]
            )
            self.names = Names()
            self.values: List[Tuple[Tuple[int, str, int], Any]] = []
            for key in self.compared:
                spec = SPECS[key]
                cls = message_class(spec)
                msgs = [full_value(spec, key[2]), cls()] + _draw(spec, key[2], DRAWS)
                self.values += [(key, m) for m in msgs]
            self.ours = [m.encode(key[2]) for key, m in self.values]
            self.read = oracle.run([read_case(k, d, v, b) for ((k, d, v), _), b in zip(self.values, self.ours)])
            for ((k, d, v), _), r in zip(self.values, self.read):
                self.names.learn(SPECS[k, d, v].root, v, r.get("json"))
            self.defaults = oracle.run([default_case(*key) for key in self.compared])
            for key, r in zip(self.compared, self.defaults):
                self.names.learn(SPECS[key].root, key[2], r.get("json"))
            self.built = oracle.run([json_case(k, d, v, self.kafka_json(k, d, v, m)) for (k, d, v), m in self.values])
            compared = set(self.compared)
            self.bad_cases = list(_bad_inputs(self.values, self.ours))
            self.bad_cases += [case for case in _corpus_bodies() if case[0] in compared]
            self.pins = oracle.run([read_case(*case) for _, case in PINS])
            # The default message of each flexible version with an unknown tagged field in its root: the
            # root's tag section is the encoding's last byte, a zero count when nothing tagged is set.
            self.unknown = [
                (key, cls_default[:-1] + UNKNOWN_TAG)
                for key, cls_default in ((k, message_class(SPECS[k])().encode(k[2])) for k in self.compared)
                if SPECS[key].flexible_in(key[2])
            ]
            self.unknown_results = oracle.run([read_case(*k, data) for k, data in self.unknown])
            self.bad = oracle.run([read_case(k, d, v, data) for (k, d, v), data, _ in self.bad_cases])
        finally:
            oracle.close()
        self.seconds = time.monotonic() - started

    def kafka_json(self, k: int, d: str, v: int, msg: Any, records: bool = True) -> Dict[str, Any]:
        spec = SPECS[k, d, v]
        return to_kafka_json(spec.root, message_class(spec), v, msg.to_dict(), self.names, records)


def _bad_inputs(values: List[Tuple[Tuple[int, str, int], Any]], ours: List[bytes]):
    """(case, bytes, how) — truncations and byte mutations of kproto's encodings, deterministic per seed."""
    rnd = random.Random(SEED)
    seen = set()
    for (key, _), data in zip(values, ours):
        if not data:
            continue
        variants = [(data[: rnd.randrange(len(data))], "truncated"), (data + b"\x00", "one byte more")]
        for _ in range(2):
            pos = rnd.randrange(len(data))
            mutated = bytearray(data)
            mutated[pos] = rnd.choice([0x00, 0xFF, 0x7F, 0x80, mutated[pos] ^ (1 << rnd.randrange(8))])
            variants.append((bytes(mutated), f"byte {pos} -> {mutated[pos]:#04x}"))
        for bad, how in variants:
            if bad != data and (key, bad) not in seen:
                seen.add((key, bad))
                yield key, bad, how


def _corpus_bodies() -> List[Tuple[Tuple[int, str, int], bytes, str]]:
    """(case, body, file) for every request and response frame of the fuzz corpora (seeds, minimised
    crashes, regressions) whose frame and header kproto reads: their bodies go to Kafka too."""
    from fuzz import fuzz_response_frames

    fuzz_response_frames.setup()
    out = []
    for kind in ("request_frames", "response_frames"):
        for path in sorted((CORPUS / kind).iterdir()):
            data = path.read_bytes()
            try:
                if kind == "request_frames":
                    if not data:
                        continue
                    frame = data[1:] if data[0] & 1 else len(data[1:]).to_bytes(4, "big") + data[1:]
                    header, pos = decode_request_header(frame)
                    key = (header.api_key, "request", header.api_version)
                else:
                    selected = fuzz_response_frames.select(data)
                    if selected is None:
                        continue
                    api_key, version, frame = selected
                    key = (api_key, "response", version)
                    check_frame(frame)
                    _, pos = ResponseHeader.decode_from(frame, 4, len(frame), SPECS[key].header_version(version))
            except kproto.KprotoError:
                continue  # the frame or header is what is bad: there is no body to compare
            if key in SPECS:
                out.append((key, frame[pos:], f"fuzz corpus {kind}/{path.name}"))
    return out


_RUNS: Dict[str, Run] = {}


def _run_for(release: str, tmp_path_factory: pytest.TempPathFactory, config: Any = None) -> Run:
    """The comparison against ``release``, made once per session (one JVM, a few round trips)."""
    if release not in _RUNS:
        try:
            _RUNS[release] = Run(release, tmp_path_factory.mktemp("kafka-oracle"))
        except jars.JavaToolMissingError as exc:  # no mvn to resolve jars not yet in the cache
            _java_missing(exc)
        r = _RUNS[release]
        line = (
            f"\nkafka-clients {release}: {len(r.compared)} (api, direction, version) compared, "
            f"{len(r.values)} values, {len(r.bad_cases)} bad and fuzz-corpus inputs, {r.seconds:.1f} s "
            f"(seed {SEED})"
        )
        capture = config.pluginmanager.getplugin("capturemanager") if config is not None else None
        if capture is not None:
            with capture.global_and_fixture_disabled():  # the counts belong in every run's output
                print(line)
        else:
            print(line)
    return _RUNS[release]


@pytest.fixture(scope="module", params=RELEASES)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run_for(request.param, tmp_path_factory, request.config)


def _label(key: Tuple[int, str, int], msg: Any = None) -> str:
    return f"{SPECS[key].name} v{key[2]}" + (f" {msg!r}"[:300] if msg is not None else "")


def test_every_version_kafka_knows_was_compared(run: Run) -> None:
    """Coverage: each (api key, direction, version) the release knows was compared, or is pinned."""
    missing = sorted(run.known - set(run.compared) - set(run.early) - BEYOND_KPROTO)
    assert not missing, (
        f"kafka-clients {run.kafka_version} knows (api, direction, version) that were not compared: {missing}"
    )
    # Every pinned version is one some release knows and kproto lacks: the list cannot go stale silently.
    assert all(key not in SPECS for key in BEYOND_KPROTO)
    assert set(run.compared) <= set(SPECS)


def test_every_kproto_version_is_compared_by_some_release(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The other way round: each (api key, direction, version) kproto has meets Kafka's classes somewhere."""
    compared = set().union(*(_run_for(r, tmp_path_factory, request.config).compared for r in RELEASES))
    assert sorted(set(SPECS) - compared) == []


def test_early_access_layouts_still_differ(run: Run) -> None:
    """The pinned early-access layouts are what kproto does not read: Kafka refuses or rewrites kproto's bytes."""
    for key, r in zip(run.early, run.early_results):
        ours = full_value(SPECS[key], key[2]).encode(key[2])
        assert "error" in r or r["rest"] or r.get("bytes") != ours, f"{_label(key)} now agrees: unpin it"
    assert all(k[1:] in SPECS for k in EARLY_ACCESS)
    assert not any(r == RELEASES[-1] for r, *_ in EARLY_ACCESS), "the newest release must compare every version"


def test_beyond_kproto_is_exactly_what_the_newest_release_adds(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The pinned surplus is exactly the newest release's: a spec that adds one of them unpins it here."""
    newest = _run_for(RELEASES[-1], tmp_path_factory, request.config)
    assert newest.known - set(SPECS) == BEYOND_KPROTO


def test_kafka_reads_kproto_bytes_and_writes_them_back(run: Run) -> None:
    """(a) every byte read, the same bytes written."""
    bad = []
    for (key, msg), ours, r in zip(run.values, run.ours, run.read):
        if "error" in r:
            bad.append(f"{_label(key, msg)}: Kafka refused kproto's bytes: {r['error']}")
        elif r["rest"]:
            bad.append(f"{_label(key, msg)}: Kafka left {r['rest']} bytes unread")
        elif "write_error" in r:
            bad.append(f"{_label(key, msg)}: Kafka cannot write what it read: {r['write_error']}")
        elif r["bytes"] != ours:
            bad.append(f"{_label(key, msg)}: Kafka writes {r['bytes'].hex()} for kproto's {ours.hex()}")
    assert not bad, f"{len(bad)} of {len(run.values)}:\n" + "\n".join(bad[:20])


def test_unknown_tagged_fields_survive_both(run: Run) -> None:
    """An unknown tagged field is kept and written back where it was, by Kafka and by kproto alike."""
    bad = []
    for (key, data), r in zip(run.unknown, run.unknown_results):
        cls = message_class(SPECS[key])
        if "error" in r or r["rest"] or r.get("bytes") != data:
            bad.append(f"{_label(key)}: Kafka {r.get('error') or r.get('bytes', b'').hex()} for {data.hex()}")
        elif cls.decode(data, key[2]).encode(key[2]) != data:
            bad.append(f"{_label(key)}: kproto drops or moves the unknown tag in {data.hex()}")
    assert not bad, "\n".join(bad[:20])
    assert len(run.unknown) > 100


def test_kafka_json_is_kproto_to_dict(run: Run) -> None:
    """(b) Kafka's JSON form of what it read is kproto's to_dict() under the name/value mapping."""
    bad = []
    for ((k, d, v), msg), r in zip(run.values, run.read):
        if "json" not in r:
            continue  # reported by the test above
        problem = diff(run.kafka_json(k, d, v, msg, records=False), r["json"])
        if problem:
            bad.append(f"{_label((k, d, v), msg)}: {problem}")
    assert not bad, f"{len(bad)} of {len(run.values)}:\n" + "\n".join(bad[:20])


def test_kafka_messages_built_from_json_decode_in_kproto(run: Run) -> None:
    """(c) the message Kafka builds from kproto's JSON encodes to kproto's bytes and decodes to the value."""
    bad = []
    for ((k, d, v), msg), ours, r in zip(run.values, run.ours, run.built):
        if "error" in r or "write_error" in r:
            bad.append(f"{_label((k, d, v), msg)}: Kafka refused the JSON: {r.get('error', r.get('write_error'))}")
            continue
        cls = message_class(SPECS[k, d, v])
        try:
            back = cls.decode(r["bytes"], v)
        except kproto.DecodeError as exc:
            bad.append(f"{_label((k, d, v), msg)}: kproto cannot decode Kafka's bytes: {exc}")
            continue
        if back.to_dict() != cls.decode(ours, v).to_dict() or r["bytes"] != ours:
            bad.append(f"{_label((k, d, v), msg)}: Kafka wrote {r['bytes'].hex()}, kproto {ours.hex()}")
    assert not bad, f"{len(bad)} of {len(run.values)}:\n" + "\n".join(bad[:20])


def test_kafka_default_messages_are_kproto_defaults(run: Run) -> None:
    """(c) Kafka's message at its defaults decodes in kproto to kproto's default message, and is its encoding."""
    bad = []
    for key, r in zip(run.compared, run.defaults):
        cls = message_class(SPECS[key])
        try:
            ours = cls().encode(key[2])
        except kproto.KprotoError as exc:
            ours = exc
        if "error" in r or "write_error" in r:
            if not isinstance(ours, kproto.KprotoError):
                bad.append(
                    f"{_label(key)}: Kafka cannot write its default "
                    f"({r.get('error', r.get('write_error'))}), kproto can"
                )
            continue
        if isinstance(ours, Exception):
            bad.append(f"{_label(key)}: kproto cannot encode its default: {ours}")
        elif r["bytes"] != ours or cls.decode(r["bytes"], key[2]) != cls():
            bad.append(f"{_label(key)}: Kafka's default {r['bytes'].hex()} vs kproto's {ours.hex()}")
    assert not bad, f"{len(bad)} of {len(run.compared)}:\n" + "\n".join(bad[:20])


def test_bad_input_kafka_refuses_kproto_refuses_kafka_accepts_kproto_agrees(run: Run) -> None:
    """Truncated and mutated encodings: Kafka's verdict is kproto's, and accepted bytes mean the same values."""
    bad = []
    for (key, data, how), r in zip(run.bad_cases, run.bad):
        cls = message_class(SPECS[key])
        try:
            ours = cls.decode(data, key[2])
        except kproto.DecodeError as exc:
            ours = exc
        except Exception as exc:  # anything else is a bug whatever Kafka says
            bad.append(f"{_label(key)} {how}: kproto raised {type(exc).__name__}: {exc} on {data.hex()}")
            continue
        tolerated = _tolerated(key, data, r, ours)
        if tolerated:
            continue
        if "error" in r:
            if not isinstance(ours, kproto.DecodeError):
                bad.append(f"{_label(key)} {how}: Kafka refuses ({r['error']}), kproto decodes {data.hex()}")
        elif isinstance(ours, kproto.DecodeError):
            bad.append(f"{_label(key)} {how}: Kafka accepts, kproto raises {ours} on {data.hex()}")
        else:
            problem = diff(run.kafka_json(*key, ours, records=False), r["json"])
            if problem:
                bad.append(f"{_label(key)} {how}: {problem} on {data.hex()}")
    assert not bad, f"{len(bad)} of {len(run.bad_cases)}:\n" + "\n".join(bad[:30])


#: Where Kafka's generated readers accept bytes that kproto refuses (docs/java-oracle.md): the name, and the
#: pattern of kproto's DecodeError reason.  Each is pinned by a hand-built frame in
#: ``test_documented_difference`` below.  kproto is the stricter side in every one of them: it refuses
#: what it could not write back byte for byte.
TOLERATED_BY_KAFKA = {
    "trailing bytes": re.compile(r"trailing bytes after"),
    "invalid UTF-8": re.compile(r"invalid UTF-8"),
    "boolean byte not 0 or 1": re.compile(r"boolean byte -?\d+ at offset \d+ is neither 0 nor 1"),
    "null marker other than -1": re.compile(
        r"invalid (length|array count) -(\d{2,}|[2-9]) at offset \d+"
        r"|nullable struct marker -?\d+ at offset \d+ is neither -1"
    ),
    "tagged-field framing": re.compile(
        r"tagged field \d+ (of \d+ bytes .* is longer than|ends at offset \d+, but its size says)"
        r"|tag \d+ at offset \d+ is (repeated|out of order)"
    ),
    "varint encoding": re.compile(r"varint at offset \d+ (is not minimally encoded|overflows 32 bits)"),
}


#: One hand-built body per documented difference: Kafka accepts it, kproto refuses it with that reason.
PINS = [
    # HeartbeatRequest v0 (group "g", generation 1, member "m") and one byte more.
    ("trailing bytes", (12, "request", 0, b"\x00\x01g\x00\x00\x00\x01\x00\x01m" + b"\x00")),
    # HeartbeatRequest v0 whose group id is the single byte 0xff (Kafka reads U+FFFD).
    ("invalid UTF-8", (12, "request", 0, b"\x00\x01\xff\x00\x00\x00\x01\x00\x01m")),
    # MetadataRequest v4: topics null, allow_auto_topic_creation 2 (Kafka reads true).
    ("boolean byte not 0 or 1", (3, "request", 4, b"\xff\xff\xff\xff\x02")),
    # MetadataRequest v1 with topic count -2 (Kafka reads null, as for -1).
    ("null marker other than -1", (3, "request", 1, b"\xff\xff\xff\xfe")),
    # ApiVersionsResponse v3: no error, no api keys, no throttle, then tag 1 (FinalizedFeaturesEpoch, an
    # int64) whose size prefix says 9 bytes: Kafka reads the 8 of an int64 and ignores the prefix.
    ("tagged-field framing", (18, "response", 3, b"\x00\x00\x01\x00\x00\x00\x00\x01\x01\x09" + b"\x00" * 7 + b"\x05")),
    # ApiVersionsRequest v3 whose client software name length is 1 + 2**32 in a five-byte varint: Kafka
    # drops the bits past 32 and reads 1 (the empty string).
    ("varint encoding", (18, "request", 3, b"\x81\x80\x80\x80\x10\x01\x00")),
]


@pytest.mark.parametrize("name", [name for name, _ in PINS])
def test_documented_difference(run: Run, name: str) -> None:
    """Each difference in TOLERATED_BY_KAFKA still exists in both directions: Kafka accepts, kproto refuses."""
    index = [n for n, _ in PINS].index(name)
    key, data = PINS[index][1][:3], PINS[index][1][3]
    r = run.pins[index]
    assert "error" not in r, f"Kafka {run.kafka_version} now refuses the {name} example: {r['error']}"
    with pytest.raises(kproto.DecodeError) as info:
        message_class(SPECS[key]).decode(data, key[2])
    assert _tolerated(key, data, r, info.value) == name, info.value
    assert set(TOLERATED_BY_KAFKA) == {n for n, _ in PINS}


def _tolerated(key: Tuple[int, str, int], data: bytes, r: Dict[str, Any], ours: Any) -> str:
    """The documented difference that explains a disagreement, or ''."""
    if "error" in r or not isinstance(ours, kproto.DecodeError):
        return ""
    if _in_tagged_field(SPECS[key], key[2], ours.path):
        return "tagged-field framing"  # the bytes ran out inside a known tagged field's window
    for name, pattern in TOLERATED_BY_KAFKA.items():
        if pattern.search(ours.reason):
            if name == "trailing bytes" and not r["rest"]:
                return ""
            if name == "invalid UTF-8" and "\ufffd" not in json.dumps(r["json"], ensure_ascii=False):
                return ""  # Kafka decodes malformed UTF-8 to U+FFFD: its value must show one
            return name
    return ""


def _in_tagged_field(spec: Any, version: int, path: str) -> bool:
    """Whether a DecodeError's field path goes through a field that ``version`` carries as a tagged field."""
    struct, f = spec.root, None
    for part in re.sub(r"\[\d+\]", "", path).split("."):
        if f is not None:
            t = f.type.element if f.type.is_array else f.type
            if t is None or not t.is_struct:
                return False
            struct = t.struct
        f = next((x for x in struct.fields_for(version) if x.attr == part), None)
        if f is None:
            return False
        if f.tagged_in(version):
            return True
    return False
