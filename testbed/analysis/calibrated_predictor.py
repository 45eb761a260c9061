"""A ``calibrated`` migration-time predictor beside Eq. 1, judged on the same migrations.

Both are re-derived per migration from what the controller had at decision time (the checkpoint
size S and the *predicted* bandwidth B), as testbed.analysis.validation does for its predictions:

- **Eq. 1** (``predicted_total_corrected_s``): ``8 S / (B x 1448/1514)`` + the predicted load and
  downtime (the scenario's constants or per-GB model); no checkpoint write.
- **calibrated**: the same corrected transfer + ``checkpoint_s(S) + load_s(S) + downtime_s(S)``
  from a measured, size-dependent I/O model (``testbed.io_model``: ``default_io_model()`` returns
  an object whose ``.mean(size_gb)`` gives ``(checkpoint_s, load_s, downtime_s)``).

Each is compared with the realised total, checkpoint write included (the outcome's total:
testbed.analysis.outcomes). Per substrate: the median |error| of each seed's migrations, then
the mean over seeds with a 95 % Student-t interval (testbed.stats.t_interval) and a paired t-test
of the two predictors over the same seeds.

On sim the "realised" total is itself a model's output, so the sim rows are not evidence for the
calibrated predictor; the emulated rows (measured) are.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pandas as pd

from testbed.analysis.markdown import md_table
from testbed.analysis.outcomes import outcome_s
from testbed.errors import TestbedError
from testbed.feasibility import TCP_EFFICIENCY_MTU1500
from testbed.stats import Interval, paired_test, t_interval

NO_MODEL = "calibrated predictor: no I/O model available"


class IoMeanModel(Protocol):
    """What this module needs of ``testbed.io_model.IoModel``."""

    def mean(self, size_gb: float) -> tuple[float, float, float]:
        """(checkpoint_s, load_s, downtime_s) expected for a checkpoint of ``size_gb`` GB."""


def default_model(downtime_s: float) -> tuple[IoMeanModel | None, str]:
    """``(testbed.io_model.default_io_model(downtime_s=downtime_s), "")`` (the calibration shipped with
    testbed; it measures no downtime, so the model's downtime is ``downtime_s``), or ``(None, why)``
    when there is none: the module is not in this tree, or it refused (its typed error)."""
    try:
        from testbed.io_model import default_io_model
    except ModuleNotFoundError as e:
        if e.name not in ("testbed.io_model", "testbed"):
            raise  # the module is there but something it imports is not: a real fault
        return None, "testbed/io_model.py is not in this tree"
    except ImportError as e:  # the module is there without default_io_model
        return None, f"testbed.io_model has no default_io_model ({e})"
    try:
        model = default_io_model(downtime_s=downtime_s)
    except (TestbedError, OSError, ValueError) as e:
        return None, f"default_io_model refused: {type(e).__name__}: {e}"
    if model is None:
        return None, "default_io_model returned no model"
    return model, ""


def _io_terms(size_gb: pd.Series, model: IoMeanModel) -> pd.DataFrame:
    """The model's (checkpoint, load, downtime) seconds for each size (evaluated once per size)."""
    sizes = pd.to_numeric(size_gb, errors="coerce").astype(float)
    table = {s: tuple(float(x) for x in model.mean(float(s))) for s in sizes.dropna().unique()}
    rows = [table.get(s, (np.nan, np.nan, np.nan)) for s in sizes]
    return pd.DataFrame(rows, index=size_gb.index, columns=["cal_checkpoint_s", "cal_load_s", "cal_downtime_s"])


def predictions(m: pd.DataFrame, model: IoMeanModel) -> pd.DataFrame:
    """Completed migrations with a realised total: ``substrate``, ``seed``, ``outcome_total_s``
    (the realised total, checkpoint write included), ``predicted_total_eq1_s`` (Eq. 1 with the corrected
    transfer), ``predicted_total_calibrated_s`` and the model's three terms (``cal_*_s``)."""
    if not len(m) or "status" not in m.columns:
        return pd.DataFrame()
    realised = outcome_s(m, "total")
    done = m[(m["status"] == "completed") & realised.notna()]
    if not len(done):
        return pd.DataFrame()
    size = pd.to_numeric(done["checkpoint_gb"], errors="coerce").astype(float)
    bw = pd.to_numeric(done["predicted_bandwidth_gbps"], errors="coerce").astype(float)
    transfer = 8.0 * size / bw / TCP_EFFICIENCY_MTU1500
    fixed = (pd.to_numeric(done["predicted_load_s"], errors="coerce")
             + pd.to_numeric(done["predicted_downtime_s"], errors="coerce")).astype(float)
    io = _io_terms(done["checkpoint_gb"], model)
    out = pd.DataFrame({"substrate": done["substrate"] if "substrate" in done.columns else "?",
                        "seed": done["seed"] if "seed" in done.columns else 0,
                        "checkpoint_gb": size, "outcome_total_s": realised[done.index].astype(float),
                        "predicted_total_eq1_s": transfer + fixed}, index=done.index)
    out = out.join(io)
    out["predicted_total_calibrated_s"] = transfer + io.sum(axis=1, skipna=False)
    for name in ("eq1", "calibrated"):
        err = out[f"predicted_total_{name}_s"] - out["outcome_total_s"]
        out[f"abs_err_{name}_s"] = err.abs()
        out[f"abs_rel_err_{name}"] = (err / out["outcome_total_s"]).abs()
    return out.reset_index(drop=True)


def _ci_words(iv: Interval | None, scale: float = 1.0) -> str:
    if iv is None:
        return "-"
    if iv.n < 2:
        return f"{iv.mean * scale:.3g} (1 seed: no CI)"
    return f"{iv.mean * scale:.3g} [{iv.lo * scale:.3g}, {iv.hi * scale:.3g}]"


def comparison(p: pd.DataFrame) -> pd.DataFrame:
    """Per substrate: seeds, migrations, and for each predictor the per-seed median |error| (relative
    and in s) as mean over seeds [95 % CI]; ``paired_t_p``: the paired t-test of the per-seed median
    |relative error| of Eq. 1 against the calibrated predictor. ``p`` from :func:`predictions`."""
    if not len(p):
        return pd.DataFrame()
    rows = []
    for sub, g in p.groupby("substrate", sort=True):
        per_seed = g.groupby("seed", sort=True)[["abs_rel_err_eq1", "abs_rel_err_calibrated",
                                                 "abs_err_eq1_s", "abs_err_calibrated_s"]].median()
        test = paired_test(per_seed["abs_rel_err_eq1"], per_seed["abs_rel_err_calibrated"])
        rows.append({
            "substrate": sub, "truth": "modelled (sim)" if sub == "sim" else "measured",
            "seeds": len(per_seed), "migrations": len(g),
            "eq1_median_abs_err_pct": _ci_words(t_interval(per_seed["abs_rel_err_eq1"]), 100.0),
            "calibrated_median_abs_err_pct": _ci_words(t_interval(per_seed["abs_rel_err_calibrated"]), 100.0),
            "eq1_median_abs_err_s": _ci_words(t_interval(per_seed["abs_err_eq1_s"])),
            "calibrated_median_abs_err_s": _ci_words(t_interval(per_seed["abs_err_calibrated_s"])),
            "paired_t_p": test.t_p if test is not None else np.nan})
    return pd.DataFrame(rows)


def default_predictions(m: pd.DataFrame) -> tuple[pd.DataFrame, str, str]:
    """:func:`predictions` with the shipped I/O model, its downtime the controller's
    (``predicted_downtime_s``: nothing calibrated measures downtime, so the calibrated predictor
    keeps Eq. 1's), one model per distinct value: ``(predictions, the model's source, "")``, or
    ``(empty, "", why)`` when there is no model."""
    parts, source = [], ""
    downtime = pd.to_numeric(m["predicted_downtime_s"], errors="coerce") if len(m) else pd.Series(dtype=float)
    for d in sorted(downtime.dropna().unique()):
        model, why = default_model(float(d))
        if model is None:
            return pd.DataFrame(), "", why
        source = source or str(getattr(model, "source", "") or type(model).__name__)
        parts.append(predictions(m[downtime == d], model))
    parts = [x for x in parts if len(x)]
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), source, ""


def markdown(m: pd.DataFrame, model: IoMeanModel | None = None) -> list[str]:
    """The report's section. ``model`` None: the shipped model (:func:`default_predictions`); without
    one the section says so in one line (:data:`NO_MODEL` and why) instead of a table."""
    if not len(m):
        return []
    lines = ["## Eq. 1 vs a calibrated predictor of the total migration time", "",
             "Both from what the controller had (size S, predicted bandwidth B), against the realised total "
             "**including the checkpoint write**: Eq. 1 = `8S/(0.956 B)` + predicted load + downtime (the "
             "paper's terms, TCP-corrected transfer); calibrated = the same transfer + checkpoint write and load "
             "at S from the measured, size-dependent I/O model (`testbed/io_model.py`) + the predicted downtime "
             "(no calibration measures downtime). Per seed the median |error| of its migrations; mean over seeds "
             "and 95 % t-interval; `paired_t_p`: Eq. 1 vs calibrated over the same seeds (relative errors).", ""]
    if model is None:
        p, source, why = default_predictions(m)
        if why:
            return lines + [f"**{NO_MODEL}** ({why}).", ""]
    else:
        p, source = predictions(m, model), type(model).__name__
    table = comparison(p)
    lines += [f"I/O model: {source}.", "", md_table(table), ""]
    if len(table) and (table["substrate"] == "sim").any():
        lines += ["On **sim** the realised total is not a measurement: the sim's truth and the calibrated "
                  "predictor come from the same fitted model (the sim draws each migration's checkpoint write "
                  "and load from it, or, with `substrate.io_model: constant`, uses constants of its own), so the "
                  "sim rows show how far the model's spread and Eq. 1's constants are from the model's mean, not "
                  "how well either predicts. They are not evidence for the calibrated predictor; "
                  + ("the emulated rows (measured) are." if (table["substrate"] != "sim").any()
                     else "only emulated runs (measured) would be, and this report has none."), ""]
    return lines
