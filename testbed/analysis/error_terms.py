"""Where a migration-time prediction goes wrong: the error of Eq. 1 split into its terms.

For every completed migration, the time from the decision to the job running again is the sum of
five terms, and so is Eq. 1's prediction of it:

==============  ======================================  ==============================================
term            predicted (what the controller had)     realised
==============  ======================================  ==============================================
checkpoint      0 (Eq. 1 has no checkpoint write)       the checkpoint phase: saving it at the source
transfer        ``8 S / B`` (the paper's, B predicted)  the transfer phase (bytes on the wire)
load            ``predicted_load_s``                    the load phase (durable at the destination, read back)
downtime        ``predicted_downtime_s``                the rest of pause-to-resume
control         0                                       ``start_lag_s``: the control plane's delay
                                                        between the decision and the first phase
==============  ======================================  ==============================================

Each term's error is ``realised - predicted`` in seconds (positive: the term took longer than Eq. 1
said), and the total error is their sum: ``(total + start lag) - (8 S / B + load + downtime)``,
where ``total`` is the outcome's own total (testbed.analysis.outcomes). A term's *share* is
``|its error| / sum over terms of |error|``: the part of the error budget it accounts for, in
[0, 1], so that terms of opposite sign do not hide each other.

On an emulated substrate the phases are measurements (``outcome_*`` with ``outcome_basis``
``measured``, also in ``actual_*``); on sim they are the model's (``modelled``): the table says which (``basis``: measured, modelled, "none recorded (0 s)" for a term
the substrate does not produce, such as the control delay on sim, or "not recorded": no value).
Where the checkpoint phase has no column of its own, it is what the outcome's total holds beyond
transfer, load and downtime (the outcome's total is by definition the sum of the four phases).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from testbed.analysis.markdown import md_table
from testbed.analysis.outcomes import basis as outcome_basis
from testbed.analysis.outcomes import outcome_s
from testbed.analysis.figures import save as save_figure

TERMS = ("checkpoint", "transfer", "load", "downtime", "control")
TERM_WORDS = {"checkpoint": "checkpoint write", "transfer": "transfer", "load": "load", "downtime": "downtime",
              "control": "control delay", "other": "unattributed", "total": "total"}
MEASURED, MODELLED, NONE, MISSING = "measured", "modelled", "none recorded (0 s)", "not recorded"
_EPS_S = 1e-6  # below this a residual is float rounding, not time


def _col(m: pd.DataFrame, name: str) -> pd.Series:
    if name in m.columns:
        return pd.to_numeric(m[name], errors="coerce").astype(float)
    return pd.Series(np.nan, index=m.index, dtype=float)


def _basis(m: pd.DataFrame, phase: str) -> pd.Series:
    """Per row: ``measured`` where ``actual_<phase>_s`` holds a value, ``modelled`` where only the
    outcome does, else :data:`MISSING`."""
    return outcome_basis(m, phase).fillna(MISSING)


def term_errors(m: pd.DataFrame) -> pd.DataFrame:
    """One row per completed migration with a realised total: for every term ``predicted_<term>_s``,
    ``real_<term>_s``, ``err_<term>_s`` (realised - predicted), ``share_<term>`` and ``basis_<term>``;
    ``err_other_s`` (the realised time no term accounts for: 0 up to rounding unless a substrate
    recorded a checkpoint phase that its total does not hold), ``err_total_s`` ((total + start lag) -
    Eq. 1's total: the sum of every ``err_*_s`` where all are known) and the row's ``substrate``, ``label``, ``seed``, ``run`` where ``m`` has them."""
    if not len(m) or "status" not in m.columns:
        return pd.DataFrame()
    done = m[(m["status"] == "completed") & outcome_s(m, "total").notna()]
    if not len(done):
        return pd.DataFrame()
    keep = [c for c in ("run", "substrate", "label", "seed", "checkpoint_gb") if c in done.columns]
    out = done[keep].copy()
    size_gb = _col(done, "checkpoint_gb")
    phases = {p: outcome_s(done, p).astype(float) for p in ("transfer", "load", "downtime")}
    total = outcome_s(done, "total").astype(float)
    residual = total - phases["transfer"] - phases["load"] - phases["downtime"]
    recorded_ckpt = outcome_s(done, "checkpoint").astype(float)
    real = {"checkpoint": recorded_ckpt.fillna(residual.where(residual.isna() | (residual.abs() > _EPS_S), 0.0)),
            **phases,
            "control": _col(done, "start_lag_s").fillna(0.0)}
    pred = {"checkpoint": pd.Series(0.0, index=done.index),
            "transfer": 8.0 * size_gb / _col(done, "predicted_bandwidth_gbps"),
            "load": _col(done, "predicted_load_s"), "downtime": _col(done, "predicted_downtime_s"),
            "control": pd.Series(0.0, index=done.index)}
    ckpt_basis = _basis(done, "checkpoint")
    unrecorded = (ckpt_basis == MISSING) & residual.notna()
    ckpt_basis[unrecorded] = np.where(residual[unrecorded].abs() > _EPS_S, "in the total (no column)", NONE)
    substrate = done["substrate"] if "substrate" in done.columns else pd.Series("?", index=done.index)
    lag_known = done["start_lag_s"].notna() if "start_lag_s" in done.columns else pd.Series(False, index=done.index)
    basis = {"checkpoint": ckpt_basis, "transfer": _basis(done, "transfer"), "load": _basis(done, "load"),
             "downtime": _basis(done, "downtime"),
             # the sim has no control plane: its start lag is 0 by construction, not a measurement
             "control": pd.Series(np.where(~lag_known | (substrate == "sim"), NONE, MEASURED), index=done.index)}
    for t in TERMS:
        out[f"predicted_{t}_s"] = pred[t]
        out[f"real_{t}_s"] = real[t]
        out[f"err_{t}_s"] = real[t] - pred[t]
        out[f"basis_{t}"] = basis[t]
    other = residual - real["checkpoint"]
    out["err_other_s"] = other.where(other.abs() > _EPS_S, 0.0)
    err_cols = [f"err_{t}_s" for t in (*TERMS, "other")]
    # the realised time from decision to resume against Eq. 1's total; where every term is known it
    # is their sum (the terms add up), and it is known even where a phase was not recorded
    out["err_total_s"] = (total + real["control"]) - sum(pred[t] for t in TERMS)
    budget = out[err_cols].abs().sum(axis=1, skipna=False)
    for t in (*TERMS, "other"):
        out[f"share_{t}"] = (out[f"err_{t}_s"].abs() / budget).where(budget > 0)
    return out.reset_index(drop=True)


def _basis_words(values: pd.Series) -> str:
    kinds = sorted(set(values.dropna()))
    return " / ".join(kinds) if kinds else "-"


def term_table(e: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Per group (default: substrate) and term: its basis, n, median and p90 of its error (s) and
    the median of its share; then the total error's median and p90. ``e`` from :func:`term_errors`."""
    by = [c for c in (by or ["substrate"]) if c in e.columns]
    if not len(e):
        return pd.DataFrame()
    rows = []
    groups = e.groupby(by, sort=True, dropna=False) if by else [((), e)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        terms = [*TERMS, *(["other"] if (g["err_other_s"].abs() > _EPS_S).any() else [])]
        for t in (*terms, "total"):
            err = g[f"err_{t}_s"].dropna()
            share = g[f"share_{t}"].dropna() if t != "total" else pd.Series(dtype=float)
            rows.append({**dict(zip(by, key)), "term": TERM_WORDS[t],
                         "basis": _basis_words(g[f"basis_{t}"]) if f"basis_{t}" in g else "-",
                         "n": int(err.size),
                         "median_err_s": float(err.median()) if err.size else np.nan,
                         "p90_err_s": float(err.quantile(0.9)) if err.size else np.nan,
                         "median_share": float(share.median()) if share.size else np.nan})
    return pd.DataFrame(rows)


def policy_table(e: pd.DataFrame) -> pd.DataFrame:
    """Per substrate and policy label: n and the median error of each term and of the total (s)."""
    by = [c for c in ("substrate", "label") if c in e.columns]
    if not len(e) or not by:
        return pd.DataFrame()
    rows = []
    for key, g in e.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = {**dict(zip(by, key)), "n": len(g)}
        for t in (*TERMS, "total"):
            row[f"median_{t}_err_s"] = float(g[f"err_{t}_s"].median())
        rows.append(row)
    return pd.DataFrame(rows)


def plot(e: pd.DataFrame, path: Path, title: str) -> Path:
    """Box plots of each term's error (s, symmetric log scale), one panel per substrate; the tick
    labels say whether the term was measured or modelled there."""
    subs = sorted(set(e["substrate"])) if len(e) and "substrate" in e.columns else [None]
    fig = Figure(figsize=(max(7.0, 6.2 * len(subs)), 5.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(subs), squeeze=False, sharey=True)).ravel()
    for ax, sub in zip(axes, subs):
        if sub is None:
            ax.text(0.5, 0.5, "no completed migration", ha="center", transform=ax.transAxes)
            continue
        g = e[e["substrate"] == sub]
        names = [*TERMS, "total"]
        data = [g[f"err_{t}_s"].dropna().to_numpy(float) for t in names]
        ticks = [f"{TERM_WORDS[t]}\n({_basis_words(g[f'basis_{t}']).replace(' (0 s)', '')})" if t != "total"
                 else "total" for t in names]
        bp = ax.boxplot(data, whis=(10, 90), showfliers=True, patch_artist=True, widths=0.6,
                        flierprops={"markersize": 3, "alpha": 0.4},
                        medianprops={"color": "black", "lw": 1.5})
        for i, box in enumerate(bp["boxes"]):
            box.set_facecolor("#90a4ae" if names[i] == "total" else f"C{i}")
            box.set_alpha(0.55)
        ax.set_xticks(range(1, len(names) + 1), ticks, fontsize=8)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.set_ylabel("error = realised - predicted (s, symmetric log)")
        words = "simulation: modelled outcome" if sub == "sim" else f"emulation ({sub}): measured outcome"
        ax.set_title(f"{words} (n={len(g)})", fontsize=10)
    fig.suptitle(title + "\nboxes: quartiles, whiskers: 10th-90th percentile")
    return save_figure(fig, path, dpi=110)


PHASES = ("checkpoint", "transfer", "load", "downtime")


def sim_emulation_gap(m: pd.DataFrame) -> pd.DataFrame:
    """Per emulated substrate and phase: the median realised phase time (s) on sim (modelled) and on
    the emulated substrate (measured), over the runs that ran the same sweep cell and seed on both,
    per policy pooled, and the gap (emulated - sim, s and %). Empty where no run has such a twin."""
    need = {"substrate", "cell", "seed", "label", "status"}
    if not len(m) or not need <= set(m.columns) or "sim" not in set(m["substrate"]) or m["substrate"].nunique() < 2:
        return pd.DataFrame()
    done = m[m["status"] == "completed"]
    key = ["cell", "seed", "label"]
    sim = done[done["substrate"] == "sim"]
    rows = []
    for sub in sorted(set(done["substrate"]) - {"sim"}):
        emu = done[done["substrate"] == sub]
        common = set(map(tuple, sim[key].astype(str).to_numpy())) & set(map(tuple, emu[key].astype(str).to_numpy()))
        if not common:
            continue
        a = sim[sim[key].astype(str).apply(tuple, axis=1).isin(common)]
        b = emu[emu[key].astype(str).apply(tuple, axis=1).isin(common)]
        for phase in PHASES:
            x = outcome_s(a, phase).where(outcome_basis(a, phase) == MODELLED).dropna()
            y = _col(b, f"actual_{phase}_s").dropna()
            if not len(x) or not len(y):
                continue
            ms, me = float(x.median()), float(y.median())
            rows.append({"substrate": sub, "phase": phase, "pairs of runs": len(common), "n sim": len(x),
                         "n emulated": len(y), "sim median s (modelled)": round(ms, 2),
                         "emulated median s (measured)": round(me, 2), "gap s": round(me - ms, 2),
                         "gap %": round(100.0 * (me - ms) / ms, 1) if ms else np.nan})
    return pd.DataFrame(rows)


def markdown(m: pd.DataFrame, out: Path | None = None) -> list[str]:
    """The report's section: the per-term tables, and the figure ``error_terms.png`` in ``out``."""
    e = term_errors(m)
    lines = ["## Migration-time error, term by term", "",
             "Each completed migration's error, `realised - predicted` in seconds, split into the terms of the "
             "time from decision to resume: **checkpoint write** (Eq. 1 predicts 0), **transfer** (Eq. 1: "
             "`8S/B` at the predicted bandwidth), **load** and **downtime** (the scenario's constants or per-GB "
             "model), **control delay** (the control plane's start lag; Eq. 1 predicts 0). The terms add up to "
             "the total error. `share`: |term error| / the sum of the |term errors| (the part of the error "
             "budget it accounts for). `basis`: measured (emulated: `outcome_basis` measured), modelled (sim: "
             "nothing on sim is a measurement), none recorded (a term the substrate does not produce: 0 s) or not "
             "recorded (no value: left out of that term's statistics and of the total).", ""]
    if not len(e):
        return lines + ["_(no completed migration)_", ""]
    lines += ["Per substrate, all policies pooled:", "", md_table(term_table(e)), ""]
    if "label" in e.columns and e["label"].nunique() > 1:
        lines += ["Median error (s) of each term per policy:", "", md_table(policy_table(e)), ""]
    gap = sim_emulation_gap(m)
    if len(gap):
        lines += ["Sim vs emulation, phase by phase: the same sweep cells and seeds on both substrates (each "
                  "policy's own migrations, which differ between them); the median realised time of each phase, "
                  "modelled on sim and measured in emulation, and the gap:", "", md_table(gap), ""]
    if out is not None:
        plot(e, Path(out) / "error_terms.png", "Migration-time error per term of Eq. 1")
        lines += ["![error per term](error_terms.png)", ""]
    return lines
