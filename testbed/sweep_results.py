"""A sweep directory as tidy DataFrames: each table of every completed trial, concatenated.

    sw = testbed.open("results/sweep-example")       # what `testbed sweep --out` or testbed.sweep wrote
    sw.summary                                       # one row per trial x policy
    ts = sw.timeseries
    ts[(ts["policy"] == "feasibility_aware") & (ts["seed"] == 0)]
    sw.results, sw.stats                             # results.parquet and table.csv

Every table (``summary``, ``migrations``, ``jobs``, ``timeseries``, ... whatever the trials'
:class:`~testbed.results.Results` offer; ``tables`` lists them) starts with ``run_id`` (the trial:
``<cell>/seed-<seed>``), ``cell``, the cell's parameters (the columns ``results.parquet`` has),
``seed``, ``policy`` and ``label``. Trials that did not complete are left out (``trials`` lists
every trial with its status).
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.recorder.reader import marker, trial_record
from testbed.results import Results, TableAccess, concat_nonempty

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

KEYS = ("run_id", "cell", "seed", "policy", "label")


def _value(v: Any) -> Any:
    """A parameter as a column value: lists and mappings as JSON text, as ``results.parquet`` has them."""
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v


class SweepResults(TableAccess):
    """A sweep directory (``sweep.json``) as DataFrames over all its completed trials."""

    _holder = "this sweep's trials"

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).resolve()
        self.manifest: dict = marker(self.path, "sweep")

    def __repr__(self) -> str:
        return (f"SweepResults({str(self.path)!r}: {len(self.runs)} of {len(self.trials)} trials done, "
                f"tables {', '.join(self.tables)})")

    @cached_property
    def param_paths(self) -> dict[str, str]:
        """The cells' parameter columns (``variant``, one per grid path, ``$name`` parameters; each
        an identifier: ``param_feasibility_alpha``) -> the path each stands for."""
        from testbed.analysis.sweep_tables import param_paths

        return param_paths(self.path)

    @cached_property
    def param_columns(self) -> list[str]:
        """The cells' parameter columns (see :attr:`param_paths`)."""
        return list(self.param_paths)

    @cached_property
    def _params(self) -> dict[str, dict]:
        return {c["id"]: c.get("params") or {} for c in self.manifest.get("cells", []) if isinstance(c, dict)}

    @cached_property
    def trials(self) -> "pd.DataFrame":
        """Every planned trial: ``run_id``, ``cell``, parameters, ``seed``, ``status`` (``missing``
        when it has not run) and ``error``."""
        import pandas as pd

        from testbed.analysis.names import TRIAL_DONE

        rows = []
        for t in self.manifest.get("trials", []):
            rec = self._record(t)
            status = rec.get("status", "missing") if rec.get("key") == t.get("key") else "missing"
            rows.append({**self._keys(t), "status": "completed" if status in TRIAL_DONE else status,
                         "error": rec.get("error")})
        columns = ["run_id", "cell", *self.param_columns, "seed", "status", "error"]
        return pd.DataFrame(rows, columns=columns)

    def _record(self, trial: dict) -> dict:
        try:
            return trial_record(self.path / trial["dir"])
        except (KeyError, TypeError):  # a plan entry without a directory
            return {}

    def _keys(self, trial: dict) -> dict:
        cell, seed = trial.get("cell"), trial.get("seed")
        params = self._params.get(cell, {})
        return {"run_id": f"{cell}/seed-{seed}", "cell": cell,
                **{c: _value(params.get(p)) for c, p in self.param_paths.items()}, "seed": seed}

    @cached_property
    def runs(self) -> dict[str, Results]:
        """``run_id`` -> the :class:`Results` of each completed trial, in plan order."""
        done = set(self.trials.loc[self.trials["status"] == "completed", "run_id"])
        return {rid: Results(self.path / t["dir"])
                for rid, t in zip(self._trial_keys, self.manifest.get("trials", [])) if rid in done}

    @cached_property
    def _trial_keys(self) -> dict[str, dict]:
        return {k["run_id"]: k for k in map(self._keys, self.manifest.get("trials", []))}

    @cached_property
    def tables(self) -> list[str]:
        """The per-policy tables the trials wrote (``summary`` aside)."""
        return sorted({name for res in self.runs.values() for name in res.tables})

    def _tidy(self, frames: "list[tuple[str, pd.DataFrame]]") -> "pd.DataFrame":
        """Each run's frame with the keys in front, concatenated."""
        import pandas as pd

        out = []
        for run_id, df in frames:
            df = df.copy()
            keys = {**self._trial_keys[run_id]}
            for i, (col, v) in enumerate(keys.items()):
                if col in df.columns:
                    df = df.drop(columns=[col])
                df.insert(i, col, [v] * len(df))
            front = [*keys, "policy", "label"]
            out.append(df[[c for c in front if c in df.columns] + [c for c in df.columns if c not in front]])
        return concat_nonempty(out, out[0].iloc[0:0] if out else pd.DataFrame(columns=list(KEYS)))

    @cached_property
    def summary(self) -> "pd.DataFrame":
        """One row per completed trial x policy: its ``summary.json``, with the keys in front."""
        return self._tidy([(rid, res.summary) for rid, res in self.runs.items()])

    def _read_table(self, name: str) -> "pd.DataFrame":
        """``<trial>/<label>/<name>.parquet`` of every completed trial and policy, concatenated."""
        return self._tidy([(rid, res.table(name)) for rid, res in self.runs.items() if name in res.tables])

    @cached_property
    def results(self) -> "pd.DataFrame":
        """``results.parquet``: per trial x policy, the sweep's metrics (with ``run_id`` in front)."""
        import pandas as pd

        from testbed.analysis.sweep_tables import read_results

        df = read_results(self.path)
        df.insert(0, "run_id", [f"{c}/seed-{s}" for c, s in zip(df["cell"], df["seed"])])
        return df

    @cached_property
    def stats(self) -> "pd.DataFrame":
        """``table.csv``: per cell x policy x metric, n, mean, std and ci95."""
        import pandas as pd

        from testbed.analysis.sweep_tables import read_table

        return read_table(self.path, self.results.drop(columns="run_id"))

