"""A plot of a run in which nothing completed is still drawn, without warnings (pytest turns them into errors)."""

import pandas as pd

from testbed.analysis.plots import jct_cdf


def test_jct_cdf_with_no_completed_job(tmp_path):
    jobs = {"feasibility_aware": pd.DataFrame({"status": ["running", "failed"], "jct_s": [float("nan")] * 2})}
    path = jct_cdf(jobs, tmp_path / "jct_cdf.png", "nothing completed")
    assert path.stat().st_size > 0
