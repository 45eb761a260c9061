"""How the fabric spreads relayed links over compiled relay processes (pure)."""

from __future__ import annotations

import pytest

from testbed.netem.relay.relaypool import (
    DEFAULT_RT_PRIO,
    RELAY_PROCS_ENV,
    RELAY_RT_PRIO_ENV,
    RelayPoolError,
    cpu_count,
    group_links,
    process_count,
    rt_priority,
)


def test_one_process_per_cpu_at_most_one_per_link():
    assert process_count(0, env={}) == 0
    assert process_count(100, env={}) == cpu_count()
    assert process_count(1, env={}) == 1
    assert process_count(100, env={RELAY_PROCS_ENV: "3"}) == 3
    assert process_count(2, env={RELAY_PROCS_ENV: "8"}) == 2


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_a_bad_process_count_is_refused_by_name(bad):
    with pytest.raises(RelayPoolError, match=f"{RELAY_PROCS_ENV} must be a whole number >= 1, got '{bad}'"):
        process_count(4, env={RELAY_PROCS_ENV: bad})


def test_groups_cover_every_link_once_and_balance_the_rate():
    rates = [10000.0, 10000.0, 1000.0, 1000.0, 1000.0, 100.0]
    groups = group_links(rates, 2)
    assert sorted(i for g in groups for i in g) == list(range(len(rates)))
    assert all(g == sorted(g) and g for g in groups)
    assert {tuple(g) for g in groups} == {(0, 2, 4), (1, 3, 5)}  # the two 10 Gbit/s links apart
    loads = [sum(rates[i] for i in g) for g in groups]
    assert max(loads) - min(loads) <= 1000.0


def test_equal_links_are_dealt_round_robin_and_groups_are_deterministic():
    groups = group_links([100.0] * 100, 2)
    assert [len(g) for g in groups] == [50, 50]
    assert groups == group_links([100.0] * 100, 2)
    assert group_links([5.0, 5.0, 5.0], 3) == [[0], [1], [2]]
    assert group_links([], 4) == []
    with pytest.raises(ValueError):
        group_links([1.0, 2.0], 3)


def test_real_time_priority_defaults_to_the_lowest_and_zero_turns_it_off():
    assert rt_priority(env={}) == DEFAULT_RT_PRIO == 1
    assert rt_priority(env={RELAY_RT_PRIO_ENV: "0"}) == 0
    assert rt_priority(env={RELAY_RT_PRIO_ENV: " 50 "}) == 50


@pytest.mark.parametrize("bad", ["-1", "100", "high", "1.5"])
def test_a_bad_real_time_priority_is_refused_by_name(bad):
    with pytest.raises(RelayPoolError, match=f"{RELAY_RT_PRIO_ENV} must be a whole number 0-99, got '{bad}'"):
        rt_priority(env={RELAY_RT_PRIO_ENV: bad})
