"""kproto.versions and the broker releases table it reads.

The table is checked against an independent source (kafka-python's own table of broker versions) and the
negotiation against kafka-python's own negotiation results; the rest pins the lookup rules and the errors.
"""

from __future__ import annotations

import doctest
import importlib
import json
from types import SimpleNamespace

import pytest

from kproto import KprotoError
from kproto.schema import SpecError
from kproto.schema.releases import load_releases, release_sort_key
from kproto.versions import (
    NegotiationError,
    UnknownReleaseError,
    broker_release,
    common_versions,
    negotiate,
    release_names,
    served_versions,
    supported_versions,
)

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, BrokerVersionData

EXPECTED_LINES = (
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1"]
    + [f"2.{m}" for m in range(9)]
    + [f"3.{m}" for m in range(10)]
    + ["4.0", "4.1"]
)

# kafka-python's table leaves out the inter-broker keys of the releases before ApiVersions existed; ours
# lists them because those brokers served them (to the controller and to other brokers).
INTER_BROKER_BEFORE_0_10 = {4, 5, 6, 7}


def kafka_python_key(name: str):
    parts = tuple(int(p) for p in name.split("."))
    return parts[:2] if parts in ((0, 9, 0), (0, 11, 0)) else parts


def kafka_python_requests():
    """Every request class kafka-python 3.x generates, by api key."""
    found = {}
    for module in ("admin", "consumer", "metadata", "producer", "sasl"):
        mod = importlib.import_module(f"kafka.protocol.{module}")
        for name in dir(mod):
            cls = getattr(mod, name)
            if isinstance(cls, type) and name.endswith("Request") and hasattr(cls, "API_KEY"):
                found[cls.API_KEY] = cls
    return found


def test_the_table_lists_every_release_line_from_0_8_0_to_4_1_oldest_first():
    assert list(release_names()) == EXPECTED_LINES
    assert [r.name for r in load_releases()] == EXPECTED_LINES


@pytest.mark.parametrize("name", EXPECTED_LINES)
def test_each_release_agrees_with_kafka_pythons_table(name):
    ours = dict(broker_release(name).apis)
    theirs = BROKER_API_VERSIONS[kafka_python_key(name)]
    if release_sort_key(name) < (0, 10):
        ours = {k: v for k, v in ours.items() if k not in INTER_BROKER_BEFORE_0_10}
    assert ours == theirs


def test_facts_of_the_pre_api_versions_releases():
    assert broker_release("0.8.0").apis == {k: (0, 0) for k in range(8)}
    assert broker_release("0.8.2").apis[8] == (0, 1) and 11 not in broker_release("0.8.2").apis
    v09 = broker_release("0.9.0").apis
    assert v09[0] == (0, 1) and v09[7] == (0, 1) and v09[8] == (0, 2) and max(v09) == 16
    assert 18 not in v09  # no ApiVersions before 0.10.0


def test_kraft_releases_drop_zookeeper_apis_and_removed_versions():
    v41 = broker_release("4.1").apis
    assert not {4, 5, 6, 7} & set(v41)
    assert v41[1] == (4, 18) and v41[2] == (1, 10) and v41[18] == (0, 4)
    # Produce v0-2 are gone too, but 4.x brokers still list them (older librdkafka reads the listed minimum)
    assert v41[0] == (0, 13)


@pytest.mark.parametrize("name", ["0.8.2", "0.9.0", "0.10.2", "1.1", "2.8", "3.9", "4.1"])
def test_negotiation_matches_kafka_pythons_own_results(name):
    """kafka-python as the client: its supported ranges, its negotiation, our negotiation."""
    requests = kafka_python_requests()
    client = {key: (cls.min_version, cls.max_version) for key, cls in requests.items()}
    ours = negotiate(name, client=client)
    broker = BrokerVersionData(broker_version=kafka_python_key(name))
    theirs = {}
    for key, cls in requests.items():
        try:
            theirs[key] = broker.api_version(cls)
        except Exception as exc:  # kafka-python's IncompatibleBrokerVersion: the API is not usable
            assert type(exc).__name__ == "IncompatibleBrokerVersion"
    assert ours == theirs
    assert ours  # every listed line shares some API with kafka-python


def test_release_strings_name_release_lines():
    assert broker_release("0.9").name == "0.9.0"
    assert broker_release("0.9.0.1").name == "0.9.0"
    assert broker_release("0.11").name == "0.11.0"
    assert broker_release("2.8.1").name == "2.8"
    assert broker_release(" 3.9.0 ").name == "3.9"
    assert broker_release("4").name == "4.0"


@pytest.mark.parametrize("text", ["", "2.x", "v2.8", "3.9.0-rc3", "2..8", "0.7.2", "4.2", "99"])
def test_unknown_or_malformed_releases_are_typed_errors(text):
    with pytest.raises(UnknownReleaseError) as info:
        broker_release(text)
    assert isinstance(info.value, KprotoError) and isinstance(info.value, LookupError)
    with pytest.raises(UnknownReleaseError):
        negotiate(text)


def test_a_newer_release_is_not_guessed_and_the_error_lists_the_known_lines():
    with pytest.raises(UnknownReleaseError, match=r"0\.8\.0 \.\. 4\.1"):
        broker_release("4.2")


def test_kproto_against_a_release_uses_the_highest_common_version():
    ours = supported_versions()
    result = negotiate("0.9.0")
    for key, (lo, hi) in broker_release("0.9.0").apis.items():
        if key in ours and max(lo, ours[key][0]) <= min(hi, ours[key][1]):
            assert result[key] == min(hi, ours[key][1])
        else:
            assert key not in result
    assert set(result) <= set(ours)


def test_apis_the_broker_lacks_or_whose_ranges_do_not_meet_are_absent():
    client = {1: (0, 3), 3: (0, 20), 18: (0, 3), 9999: (0, 1)}
    assert common_versions("4.1", client) == {3: (0, 13), 18: (0, 3)}
    assert negotiate("4.1", client=client) == {3: 13, 18: 3}  # Fetch v0-3 were removed in 4.0
    assert negotiate("0.9.0", client=client) == {1: 1, 3: 0}  # no ApiVersions before 0.10


def api_versions_response(error_code, entries):
    return SimpleNamespace(
        error_code=error_code,
        api_keys=[SimpleNamespace(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in entries.items()],
    )


def test_an_api_versions_response_is_taken_at_its_word():
    response = api_versions_response(0, {0: (0, 9), 3: (0, 12), 18: (0, 3), 10_000: (0, 0)})
    assert served_versions(response) == {0: (0, 9), 3: (0, 12), 18: (0, 3), 10_000: (0, 0)}
    assert negotiate(response, client={0: (0, 13), 3: (0, 4), 10_000: (1, 2)}) == {0: 9, 3: 4}


def test_an_api_versions_response_with_an_error_cannot_be_negotiated():
    with pytest.raises(NegotiationError, match="error code 35"):
        negotiate(api_versions_response(35, {18: (0, 3)}))


def test_a_mapping_describes_a_broker_too_and_bad_shapes_are_rejected():
    assert negotiate({1: (4, 18)}, client={1: (0, 12)}) == {1: 12}
    with pytest.raises(TypeError):
        served_versions({1: 4})
    with pytest.raises(TypeError):
        served_versions(object())


def write(tmp_path, doc, comment="// a test file\n"):
    path = tmp_path / "BrokerReleases.json"
    path.write_text(comment + json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"kind": "api", "releases": []}, "kind must be 'releases'"),
        ({"kind": "releases", "releases": [], "extra": 1}, "unknown keys"),
        ({"kind": "releases", "releases": []}, "non-empty list"),
        ({"kind": "releases", "releases": [{"release": "2.8"}]}, "exactly 'release' and 'apis'"),
        ({"kind": "releases", "releases": [{"release": "2.8.0", "apis": {"0": "0"}}]}, "not a release line"),
        ({"kind": "releases", "releases": [{"release": "2.8", "apis": {"x": "0"}}]}, "decimal number"),
        ({"kind": "releases", "releases": [{"release": "2.8", "apis": {"0": "1+"}}]}, "closed"),
        ({"kind": "releases", "releases": [{"release": "2.8", "apis": {"0": "3-1"}}]}, r"releases\[0\] \(2.8\)"),
        (
            {
                "kind": "releases",
                "releases": [{"release": "2.8", "apis": {"0": "0"}}, {"release": "2.7", "apis": {"0": "0"}}],
            },
            "oldest first",
        ),
    ],
)
def test_a_bad_releases_file_is_a_spec_error_naming_file_and_entry(tmp_path, doc, message):
    with pytest.raises(SpecError, match=message) as info:
        load_releases(write(tmp_path, doc))
    assert "BrokerReleases.json" in str(info.value)


def test_the_module_docstring_example_holds():
    import kproto.versions

    failures, tried = doctest.testmod(kproto.versions)
    assert (failures, tried) == (0, 3)


@pytest.mark.parametrize("release, version", [("2.8", 3), ("4.1", 4), ("0.10.2", 1)])
def test_a_decoded_api_versions_response_negotiates_like_its_release(release, version):
    """A broker's answer written by kafka-python's encoder, read by kproto's decoder, then negotiated."""
    from kafka.protocol.metadata import ApiVersionsResponse as PeerResponse

    import kproto.messages as km

    entry_cls = PeerResponse._struct.fields["api_keys"].array_of.data_class
    served = broker_release(release).apis
    peer = PeerResponse(
        version=version,
        error_code=0,
        throttle_time_ms=0,
        api_keys=[entry_cls(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in served.items()],
    )
    response = km.ApiVersionsResponse.decode(bytes(peer.encode()), version)
    assert served_versions(response) == dict(served)
    assert negotiate(response) == negotiate(release)
    assert negotiate(response)[18] == min(served[18][1], supported_versions()[18][1])
