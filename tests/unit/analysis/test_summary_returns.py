"""``migrations_returned_1h``: a job sent back where it came from within an hour counts; nothing else."""

from __future__ import annotations

import pandas as pd

from testbed.analysis.summary import returns_within


def _migs(rows):
    return pd.DataFrame(rows, columns=["job_id", "src", "dst", "t_decision_s"])


def test_there_and_back_within_the_hour_counts():
    m = _migs([("j1", "a", "b", 0.0), ("j1", "b", "a", 1800.0),    # back after 30 min: 1
               ("j2", "a", "b", 0.0), ("j2", "b", "a", 3600.0),    # back after exactly 1 h: not within
               ("j3", "a", "b", 0.0), ("j3", "b", "c", 600.0),     # onward, not back
               ("j4", "a", "b", 100.0), ("j5", "b", "a", 200.0)])  # two jobs: no return
    assert returns_within(m) == 1
    assert returns_within(m, window_s=3601.0) == 2


def test_order_of_rows_does_not_matter_and_chains_count_each_return():
    m = _migs([("j", "b", "a", 1200.0), ("j", "a", "b", 0.0), ("j", "a", "b", 2400.0)])
    assert returns_within(m) == 2  # a->b, b->a (20 min), a->b (20 min)
    assert returns_within(m.iloc[0:0]) == 0
