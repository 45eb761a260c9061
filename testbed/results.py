"""A run's results directory as DataFrames: :class:`Results` (``testbed.run`` returns one,
``testbed.open`` opens one a command wrote).

A Results that :func:`testbed.run` made in a temporary directory (``out=None``) owns it: the
directory is removed when the object is garbage collected or the interpreter exits."""

from __future__ import annotations

import json
import os
import shutil
import warnings
import weakref
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.recorder.reader import marker

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PathLike = str | os.PathLike


TABLES_MIGRATION = ("migrations", "jobs", "timeseries", "decisions", "power")


def _named_table(name: str) -> property:
    return property(lambda self: self.table(name), doc=f"The ``{name}`` table (:meth:`TableAccess.table`).")


class TableAccess:
    """A run's or a sweep's tables as attributes: ``migrations``, ``jobs``, ``timeseries``,
    ``decisions``, ``power``, and any other table by its name (``rounds``, ``sites``). A subclass
    lists ``tables``, says what it is in ``_holder`` ("this run") and reads one in ``_read_table``."""

    _holder = "this run"

    def table(self, name: str) -> "pd.DataFrame":
        """Table ``name`` (read once); a KeyError naming what there is when there is no such table."""
        cache = self.__dict__.setdefault("_tables", {})
        if name not in cache:
            if name not in self.tables:
                from testbed.suggest import did_you_mean

                raise KeyError(f"{self.path}: no {name!r} table{did_you_mean(name, self.tables)} "
                               f"({self._holder} has: {', '.join(self.tables) or 'none'})")
            cache[name] = self._read_table(name)
        return cache[name]

    migrations = _named_table("migrations")
    jobs = _named_table("jobs")
    timeseries = _named_table("timeseries")
    decisions = _named_table("decisions")
    power = _named_table("power")

    @property
    def plot(self) -> "RunPlots | SweepPlots":
        """Figures of these tables, each a matplotlib Figure: a run's (:class:`RunPlots`:
        ``timeseries``, ``pred_vs_actual``) or a sweep's (:class:`SweepPlots`: also ``metric``)."""
        return (RunPlots if isinstance(self, Results) else SweepPlots)(self)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.table(name)
        except KeyError as e:
            raise AttributeError(str(e.args[0])) from None


def concat_nonempty(frames: "list[pd.DataFrame]", empty: "pd.DataFrame") -> "pd.DataFrame":
    """The frames that have rows, concatenated (``empty`` when none has)."""
    import pandas as pd

    nonempty = [f for f in frames if len(f)]
    if not nonempty:
        return empty
    with warnings.catch_warnings():  # all-NA columns of one policy's or trial's table
        warnings.simplefilter("ignore", FutureWarning)
        return pd.concat(nonempty, ignore_index=True)


class Results(TableAccess):
    """A results directory as DataFrames. Every per-policy table (``<label>/<name>.parquet``) is
    read for all policies at once; ``summary`` has one row per policy (its ``summary.json``). Every
    table and ``summary`` start with the keys a sweep's tables start with (less ``cell``): ``run_id`` (the
    directory's name), ``seed`` (the run's), ``policy`` (the policy's name) and ``label`` (the
    policy's entry: its directory), so code written for one run works on a sweep's trials.

    Migration study: ``migrations``, ``jobs``, ``timeseries``, ``decisions``, ``power``. Federated
    (PowerTrip) study: ``rounds``, ``sites``. ``tables`` lists what this run has; ``table(name)``
    reads any of them.

    ``temporary=True`` (what :func:`testbed.run` does with ``out=None``): the object owns its
    directory, removed when the object is garbage collected or Python exits; :meth:`keep` keeps it."""

    _cleanup: weakref.finalize | None = None

    def __init__(self, path: PathLike, *, temporary: bool = False):
        self.path = Path(path).resolve()
        if temporary:
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)
        self.manifest: dict = marker(self.path, "run")

    @property
    def temporary(self) -> bool:
        """Whether the directory is removed with this object (see :meth:`keep`)."""
        return self._cleanup is not None and self._cleanup.alive

    def keep(self) -> Path:
        """Keep a temporary results directory after this object is gone; returns its path."""
        if self._cleanup is not None:
            self._cleanup.detach()
        return self.path

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r}: {len(self.labels)} policies, tables {', '.join(self.tables)})"

    @cached_property
    def labels(self) -> list[str]:
        """The policy entries that ran, in run order (then any best-of entry such as ``static_k``)."""
        found = sorted(p.name for p in self.path.iterdir() if p.is_dir() and (p / "summary.json").is_file())
        order: list[str] = []
        for spec in self.manifest.get("policies", []):  # the scenario's order; a static_k list's runs after it
            label = spec.get("label") or spec.get("name") if isinstance(spec, dict) else None
            order += [d for d in found if d not in order and (d == label or d.startswith(f"{label}-"))]
        return order + [d for d in found if d not in order]

    def _summary_of(self, label: str) -> dict:
        from testbed.analysis.names import current

        return current(json.loads((self.path / label / "summary.json").read_text(encoding="utf-8")))

    @cached_property
    def _summaries(self) -> dict[str, dict]:
        return {lb: self._summary_of(lb) for lb in self.labels}

    @cached_property
    def run_keys(self) -> dict:
        """``run_id`` (the directory's name) and ``seed``: the columns in front of every table."""
        return {"run_id": self.path.name, "seed": self.manifest.get("seed")}

    def _keyed(self, df: "pd.DataFrame") -> "pd.DataFrame":
        df = df.drop(columns=[c for c in self.run_keys if c in df.columns])
        for i, (col, v) in enumerate(self.run_keys.items()):
            df.insert(i, col, [v] * len(df))
        front = [*self.run_keys, "policy", "label"]
        return df[[c for c in front if c in df.columns] + [c for c in df.columns if c not in front]]

    @cached_property
    def summary(self) -> "pd.DataFrame":
        """One row per policy entry: its ``summary.json`` (the run's keys in front)."""
        import pandas as pd

        rows = [{"policy": s.get("policy", lb), "label": lb, **s} for lb, s in self._summaries.items()]
        return self._keyed(pd.DataFrame.from_records(rows, columns=["policy", "label"] if not rows else None))

    @cached_property
    def comparison(self) -> dict:
        return json.loads((self.path / "comparison.json").read_text(encoding="utf-8"))

    @cached_property
    def scenario_text(self) -> str:
        """``scenario.yaml``: the scenario as it ran."""
        return (self.path / "scenario.yaml").read_text(encoding="utf-8")

    @cached_property
    def traces(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.read_parquet(self.path / "traces.parquet")

    @cached_property
    def tables(self) -> list[str]:
        names = {p.stem for lb in self.labels for p in (self.path / lb).glob("*.parquet")}
        return sorted(names)

    def _read_table(self, name: str) -> "pd.DataFrame":
        import pandas as pd

        from testbed.analysis.names import current_columns, typed_as_today

        frames = []  # ``<label>/<name>.parquet`` of every policy entry, with ``label`` and ``policy``
        for lb in self.labels:
            f = self.path / lb / f"{name}.parquet"
            if not f.is_file():
                continue
            df = typed_as_today(name, current_columns(name, pd.read_parquet(f)))  # older results read as today's
            if "label" not in df.columns:
                df["label"] = lb
            if "policy" not in df.columns:
                df["policy"] = self._summaries[lb].get("policy", lb)
            frames.append(self._keyed(df))
        return concat_nonempty(frames, frames[0].iloc[0:0].reset_index(drop=True))



def pick_policy(labels: list[str], policies: dict[str, str], policy: str | None, holder: str) -> str:
    """The policy entry (label) ``policy`` names: a label, else a policy name with one entry; the
    only entry when None. A ValueError naming the entries otherwise."""
    from testbed.suggest import did_you_mean

    if policy is None:
        if len(labels) == 1:
            return labels[0]
        raise ValueError(f"{holder} has several policies: give policy= one of {', '.join(labels)}")
    if policy in labels:
        return policy
    named = [lb for lb in labels if policies.get(lb) == policy]
    if len(named) == 1:
        return named[0]
    if named:
        raise ValueError(f"policy {policy!r} names {len(named)} entries: give a label ({', '.join(named)})")
    raise ValueError(f"no policy {policy!r} in {holder}{did_you_mean(policy, labels)} (present: {', '.join(labels)})")


def check_columns(df: "pd.DataFrame", column: "str | list[str]", table: str) -> list[str]:
    """``column`` (one or several) as a list, each a column of ``df``; a ValueError with the nearest names."""
    from testbed.suggest import did_you_mean

    columns = [column] if isinstance(column, str) else list(column)
    for c in columns:
        if c not in df.columns:
            raise ValueError(f"no column {c!r} in {table}{did_you_mean(c, map(str, df.columns))}")
    return columns


class RunPlots:
    """``Results.plot``: figures of one run, each a ``matplotlib.figure.Figure``
    (:mod:`testbed.analysis.result_plots`)."""

    def __init__(self, results: "Results"):
        self._r = results

    def _label(self, policy: str | None) -> str:
        r = self._r
        return pick_policy(r.labels, {lb: s.get("policy", lb) for lb, s in r._summaries.items()}, policy,
                           f"{r.path}")

    def timeseries(self, policy: str | None = None, column: "str | list[str]" = "grid_kw", *,
                   migrations: bool = True):
        """One policy's time series (``policy``: its label or name; needed where the run has
        several): ``column`` (or a list of columns) of ``timeseries`` per site against scenario
        time, its migrations out and in marked."""
        from testbed.analysis.result_plots import timeseries

        label = self._label(policy)
        ts = self._r.timeseries
        columns = check_columns(ts, column, "the timeseries table")
        mine = ts[ts["label"] == label]
        migs = None
        if migrations and "migrations" in self._r.tables:
            m = self._r.migrations
            migs = m[m["label"] == label]
        return timeseries(mine, columns, f"{label}: {', '.join(columns)}", migs)

    def pred_vs_actual(self, what: str = "total", policy: str | None = None):
        """Predicted against realised migration time (``what``: transfer, load, downtime or total),
        every policy's (or ``policy``'s) completed migrations; each point says whether the realised
        value was measured (emulated substrates) or modelled (sim)."""
        from testbed.analysis.result_plots import pred_vs_realised

        m = self._r.migrations
        if policy is not None:
            m = m[m["label"] == self._label(policy)]
        return pred_vs_realised(m, f"{self._r.path.name}: predicted vs realised {what}", what)


class SweepPlots:
    """``SweepResults.plot``: figures over a sweep's trials, each a ``matplotlib.figure.Figure``.
    ``where``: a trial's ``run_id``, ``cell``, ``seed`` or a parameter column (``seed=3``,
    ``**{"policies[feasibility_aware].alpha": 0.2}``) selecting trials."""

    def __init__(self, sweep):
        self._s = sweep

    def _param(self, name: str) -> str:
        """A parameter column by its name, or by the grid path it stands for."""
        s = self._s
        if name in s.param_columns or name in ("run_id", "cell", "seed"):
            return name
        by_path = {v: k for k, v in (getattr(s, "param_paths", None) or {}).items()}
        if name in by_path:
            return by_path[name]
        from testbed.suggest import did_you_mean

        known = [*s.param_columns, *by_path]
        raise ValueError(f"{name!r} is not a parameter of this sweep{did_you_mean(name, known)} "
                         f"(parameters: {', '.join(s.param_columns) or 'none'}; also run_id, cell, seed)")

    def _where(self, df: "pd.DataFrame", where: dict) -> "pd.DataFrame":
        for name, value in where.items():
            df = df[df[self._param(name)] == value]
        return df

    def _label(self, df: "pd.DataFrame", policy: str | None) -> str:
        labels = list(dict.fromkeys(df["label"]))
        policies = dict(zip(df["label"], df["policy"]))
        return pick_policy(labels, policies, policy, "this sweep's trials")

    def timeseries(self, policy: str | None = None, column: "str | list[str]" = "grid_kw", *,
                   run_id: str | None = None, migrations: bool = True, **where):
        """One policy's time series in one trial: ``run_id`` (``<cell>/seed-<seed>``), or ``where``
        narrowing the trials to one (``seed=3, cell="001-alpha=0.2"``)."""
        if run_id is not None:
            where = {**where, "run_id": run_id}
        trials = self._where(self._s.summary, where)
        ids = list(dict.fromkeys(trials["run_id"]))
        if len(ids) != 1:
            shown = ", ".join(ids[:4]) + (", ..." if len(ids) > 4 else "")
            raise ValueError(f"{len(ids)} trials match {where or '(no selection)'}: name one with run_id= or "
                             f"seed=/cell=/a parameter" + (f" ({shown})" if ids else ""))
        return self._s.runs[ids[0]].plot.timeseries(policy, column, migrations=migrations)

    def pred_vs_actual(self, what: str = "total", policy: str | None = None, **where):
        """Predicted against realised migration time over the trials (all, or those ``where``
        selects); measured or modelled as each run recorded it."""
        from testbed.analysis.result_plots import pred_vs_realised

        m = self._where(self._s.migrations, where)
        if policy is not None:
            m = m[m["label"] == self._label(m if len(m) else self._s.summary, policy)]
        return pred_vs_realised(m, f"{self._s.path.name}: predicted vs realised {what}", what)

    def metric(self, metric: str, by: str | None = None, policy: "str | list[str] | None" = None, **where):
        """``metric`` (a summary column) against the parameter ``by`` (a parameter column or its grid
        path; default: the sweep's only one), one line per policy: the mean over seeds with its
        95 % CI (the sweep table's rule, :func:`testbed.stats.mean_ci95`)."""
        from testbed.analysis.result_plots import metric_by

        s = self._s
        if by is None:
            if len(s.param_columns) != 1:
                raise ValueError(f"give by= one of the sweep's parameters: {', '.join(s.param_columns) or 'none'}")
            by = s.param_columns[0]
        column = self._param(by)
        summary = self._where(s.summary, where)
        check_columns(summary, metric, "the sweep's summary")
        if policy is not None:
            wanted = [policy] if isinstance(policy, str) else list(policy)
            summary = summary[summary["label"].isin([self._label(summary, p) for p in wanted])]
        return metric_by(summary, metric, column, f"{s.path.name}: {metric} by {by}")
