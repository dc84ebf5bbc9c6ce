"""The range and roundrobin assignors against docs/protocol-notes.md and their invariants."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.group.assignors import ASSIGNORS, assign_range, assign_roundrobin, java_string_order


def flat(assignment):
    """member → sorted [(topic, partition)] for easy comparison."""
    return {m: sorted((t, p) for t, ps in tps.items() for p in ps) for m, tps in assignment.items()}


# --- worked examples from docs/protocol-notes.md ------------------------------------------------------------


def test_javadoc_example_range():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    result = assign_range(subs, {"t0": 3, "t1": 3})
    assert result == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}


def test_javadoc_example_roundrobin():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    result = assign_roundrobin(subs, {"t0": 3, "t1": 3})
    assert result == {"C0": {"t0": [0, 2], "t1": [1]}, "C1": {"t0": [1], "t1": [0, 2]}}


@pytest.mark.parametrize("assign", [assign_range, assign_roundrobin])
def test_uneven_subscriptions(assign):
    subs = {"a": ["t0"], "b": ["t0", "t1"], "c": ["t0", "t1"]}
    result = assign(subs, {"t0": 3, "t1": 2})
    assert result == {"a": {"t0": [0]}, "b": {"t0": [1], "t1": [0]}, "c": {"t0": [2], "t1": [1]}}


def test_java_sort_order_range():
    result = assign_range({"m10": ["t0"], "m2": ["t0"], "M1": ["t0"]}, {"t0": 5})
    assert result == {"M1": {"t0": [0, 1]}, "m10": {"t0": [2, 3]}, "m2": {"t0": [4]}}


def test_java_sort_order_roundrobin():
    result = assign_roundrobin({"m10": ["t0"], "m2": ["t0"], "M1": ["t0"]}, {"t0": 5})
    assert result == {"M1": {"t0": [0, 3]}, "m10": {"t0": [1, 4]}, "m2": {"t0": [2]}}


# --- Java String order --------------------------------------------------------------------------------


def test_java_order_is_utf16_code_units_not_code_points():
    bmp_high, astral = "\uffff", "\U0001f600"  # Java: U+1F600 is D83D DE00, below FFFF
    assert sorted([bmp_high, astral]) == [bmp_high, astral]  # Python: code points
    assert sorted([bmp_high, astral], key=java_string_order) == [astral, bmp_high]


def test_java_order_prefix_sorts_first_and_case_matters():
    assert sorted(["ab", "a", "B", "b"], key=java_string_order) == ["B", "a", "ab", "b"]


def test_range_uses_java_order_for_astral_member_ids():
    members = {"\uffff": ["t"], "\U0001f600": ["t"]}
    assert assign_range(members, {"t": 3}) == {"\U0001f600": {"t": [0, 1]}, "\uffff": {"t": [2]}}


def test_roundrobin_uses_java_order_for_topics():
    subs = {"m": ["\uffff", "\U0001f600"]}
    result = assign_roundrobin(subs, {"\uffff": 1, "\U0001f600": 1})
    assert list(result["m"]) == ["\U0001f600", "\uffff"]  # dealt in Java topic order


# --- edge cases ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("assign", [assign_range, assign_roundrobin])
def test_topic_without_metadata_is_skipped_and_every_member_is_present(assign):
    result = assign({"a": ["known", "missing"], "b": [], "c": ["missing"]}, {"known": 2})
    assert result == {"a": {"known": [0, 1]}, "b": {}, "c": {}}


@pytest.mark.parametrize("assign", [assign_range, assign_roundrobin])
def test_more_members_than_partitions(assign):
    result = assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 1})
    assert result == {"a": {"t": [0]}, "b": {}, "c": {}}


@pytest.mark.parametrize("assign", [assign_range, assign_roundrobin])
def test_no_members(assign):
    assert assign({}, {"t": 3}) == {}


def test_roundrobin_ring_position_carries_across_topics():
    # The ring keeps its position between topics: t0 has 1 partition, so t1 starts at b.
    result = assign_roundrobin({"a": ["t0", "t1"], "b": ["t0", "t1"]}, {"t0": 1, "t1": 2})
    assert result == {"a": {"t0": [0], "t1": [1]}, "b": {"t1": [0]}}


def test_assignor_registry_names():
    assert ASSIGNORS == {"range": assign_range, "roundrobin": assign_roundrobin}


# --- properties ---------------------------------------------------------------------------------------

member_ids = st.text(alphabet=st.sampled_from("aAbB1\uffff\U0001f600-"), min_size=1, max_size=4)
topic_names = st.sampled_from(["t0", "t1", "t2", "T", "\U0001f600"])


@st.composite
def group_inputs(draw):
    members = draw(st.lists(member_ids, min_size=1, max_size=6, unique=True))
    subs = {m: draw(st.lists(topic_names, max_size=4, unique=True)) for m in members}
    counts = draw(st.dictionaries(topic_names, st.integers(0, 9), max_size=5))
    return subs, counts


def _check_coverage(subs, counts, result):
    assert set(result) == set(subs)
    owners = {}
    for member, tps in result.items():
        for topic, parts in tps.items():
            assert parts, "a topic appears only when it has partitions"
            assert topic in subs[member], "only subscribers get a topic's partitions"
            for p in parts:
                assert (topic, p) not in owners, "assigned twice"
                owners[(topic, p)] = member
    subscribed = {t for ts in subs.values() for t in ts}
    expected = {(t, p) for t in subscribed if t in counts for p in range(counts[t])}
    assert set(owners) == expected


@settings(max_examples=300, deadline=None)
@given(group_inputs())
def test_every_subscribed_partition_assigned_exactly_once(inputs):
    subs, counts = inputs
    for assign in (assign_range, assign_roundrobin):
        _check_coverage(subs, counts, assign(subs, counts))


@settings(max_examples=300, deadline=None)
@given(group_inputs())
def test_range_balance_rules(inputs):
    subs, counts = inputs
    result = assign_range(subs, counts)
    for topic, count in counts.items():
        subscribers = sorted((m for m, ts in subs.items() if topic in ts), key=java_string_order)
        sizes = [len(result[m].get(topic, [])) for m in subscribers]
        if not subscribers:
            continue
        assert max(sizes) - min(sizes) <= 1
        assert sizes == sorted(sizes, reverse=True), "extra partitions go to the lowest-sorted members"
        ranges = [p for m in subscribers for p in result[m].get(topic, [])]
        assert ranges == list(range(count)), "contiguous ranges in member order"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(member_ids, min_size=1, max_size=6, unique=True),
    st.dictionaries(topic_names, st.integers(0, 9), min_size=1, max_size=4),
)
def test_roundrobin_identical_subscriptions_are_uniform(members, counts):
    subs = {m: list(counts) for m in members}
    totals = [len(flat(assign_roundrobin(subs, counts))[m]) for m in members]
    assert max(totals) - min(totals) <= 1


@settings(max_examples=100, deadline=None)
@given(group_inputs(), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_input_order(inputs, rnd):
    subs, counts = inputs
    items = list(subs.items())
    rnd.shuffle(items)
    shuffled = {m: list(reversed(ts)) for m, ts in items}
    for assign in (assign_range, assign_roundrobin):
        assert flat(assign(shuffled, counts)) == flat(assign(subs, counts))


def test_large_group_is_fast_and_balanced():
    rnd = random.Random(7)
    subs = {f"consumer-{i}-{rnd.random()}": ["a", "b", "c"] for i in range(50)}
    counts = {"a": 100, "b": 37, "c": 1}
    for assign in (assign_range, assign_roundrobin):
        _check_coverage(subs, counts, assign(subs, counts))
