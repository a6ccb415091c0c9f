"""The cross-shard lock's decisions (``backends.leaselock.decide``, pure): shared holders side by
side, an exclusive request waiting for them and keeping new shared ones out, dead holders
(not renewed for a minute) ignored. The lock against a real API server is in
tests/clusters/test_incluster.py."""

from __future__ import annotations

import pytest

from drakit.conformance.backends.leaselock import EXPIRE, decide, parse_where


def test_shared_holders_go_side_by_side() -> None:
    got, state = decide({}, "s1", False, 100.0)
    assert got and state == {"s1": {"mode": "shared", "renewed": 100.0}}
    got, state = decide(state, "s2", False, 101.0)
    assert got and set(state) == {"s1", "s2"}


def test_an_exclusive_request_waits_for_shared_holders_and_keeps_new_ones_out() -> None:
    state = {"s2": {"mode": "shared", "renewed": 100.0}}
    got, state = decide(state, "s1", True, 101.0)
    assert not got and state["s1"]["mode"] == "waiting"
    got, after = decide(state, "s3", False, 102.0)  # a new shared holder does not overtake it
    assert not got and "s3" not in after
    del state["s2"]  # the shared holder released
    got, state = decide(state, "s1", True, 103.0)
    assert got and state == {"s1": {"mode": "exclusive", "renewed": 103.0}}
    got, _ = decide(state, "s2", False, 104.0)
    assert not got


def test_a_dead_holder_is_ignored_after_it_expired() -> None:
    state = {"s2": {"mode": "shared", "renewed": 100.0}}
    assert not decide(state, "s1", True, 100.0 + EXPIRE - 1)[0]
    got, state = decide(state, "s1", True, 100.0 + EXPIRE + 1)
    assert got and set(state) == {"s1"}


def test_two_exclusive_requests_take_turns() -> None:
    state = {"s1": {"mode": "waiting", "renewed": 100.0}}
    got, _ = decide(state, "s2", True, 100.0)
    assert not got  # s1 waits first (the lower name wins a tie)
    got, _ = decide(state, "s1", True, 100.0)
    assert got


def test_parse_where() -> None:
    assert parse_where("ns/name") == ("ns", "name")
    for bad in ("name", "/name", "ns/", "a/b/c"):
        with pytest.raises(ValueError, match="is not NAMESPACE/NAME"):
            parse_where(bad)
