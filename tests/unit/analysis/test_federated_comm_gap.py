"""The measured-vs-modelled exchange summary of a federated run (netns): per round and per transfer."""

import math

import pandas as pd
import pytest

from testbed.analysis.federated_summary import comm_gap_summary


def _sites(rows):
    cols = ("round", "site", "down_s", "up_s", "predicted_down_s", "predicted_up_s", "comm_measured")
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_a_modelled_exchange_has_no_gap_summary():
    sites = _sites([(1, "a", 2.0, 2.0, 2.0, 2.0, False), (1, "agg", 0.0, 0.0, 0.0, 0.0, False)])
    assert comm_gap_summary(sites) == {}
    assert comm_gap_summary(pd.DataFrame()) == {}


def test_rounds_are_judged_on_their_summed_transfers_and_the_aggregator_row_is_left_out():
    sites = _sites([
        (1, "a", 1.0, 1.0, 1.0, 1.0, True), (1, "b", 3.3, 3.3, 3.0, 3.0, True),    # round 1: 8.6 / 8 = 1.075
        (1, "agg", 0.0, 0.0, 0.0, 0.0, False),
        (2, "a", 1.5, 1.5, 1.0, 1.0, True),                                        # round 2: 1.5
        (3, "a", 0.95, 0.95, 1.0, 1.0, True),                                      # round 3: 0.95
    ])
    g = comm_gap_summary(sites)
    assert g["comm_rounds_measured"] == 3
    assert g["comm_round_ratio_median"] == pytest.approx(1.075)
    assert g["comm_rounds_within_10pct"] == pytest.approx(2 / 3)
    assert g["comm_measured_over_modelled"] == pytest.approx((2 + 6.6 + 3 + 1.9) / (2 + 6 + 2 + 2))
    assert g["comm_round_ratio_p10"] < g["comm_round_ratio_median"] < g["comm_round_ratio_p90"]
    # per transfer: down and up ratios of every measured site-round, the median of 1, 1, 1.1, 1.1, 1.5, 1.5, .95, .95
    assert g["comm_transfer_ratio_median"] == pytest.approx(1.05)


def test_a_round_whose_model_is_zero_is_not_judged():
    sites = _sites([(1, "a", 0.4, 0.4, 0.0, 0.0, True), (2, "a", 2.0, 2.0, 2.0, 2.0, True)])
    g = comm_gap_summary(sites)
    assert g["comm_rounds_measured"] == 1 and g["comm_rounds_within_10pct"] == 1.0
    assert not math.isnan(g["comm_transfer_ratio_median"])
