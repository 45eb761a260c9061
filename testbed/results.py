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

from testbed.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PathLike = str | os.PathLike

RESULTS_FORMAT = "testbed-results/1"

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
    read for all policies at once, with ``label`` (the policy's entry: its directory) and ``policy``
    (the policy's name) columns; ``summary`` has one row per policy (its ``summary.json``).

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
        man = self.path / "manifest.json"
        try:
            manifest = json.loads(man.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SpecError([(str(path), "not a testbed results directory (no manifest.json)")]) from None
        except (OSError, ValueError) as e:
            raise SpecError([(str(man), f"cannot be read as JSON ({type(e).__name__})")]) from None
        if not isinstance(manifest, dict) or manifest.get("format") != RESULTS_FORMAT:
            raise SpecError([(str(man), f"not a testbed results manifest (format {RESULTS_FORMAT} expected)")])
        self.manifest: dict = manifest

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
    def summary(self) -> "pd.DataFrame":
        """One row per policy entry: its ``summary.json``."""
        import pandas as pd

        rows = [{"policy": s.get("policy", lb), "label": lb, **s} for lb, s in self._summaries.items()]
        return pd.DataFrame.from_records(rows)

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
            frames.append(df[["policy", "label", *(c for c in df.columns if c not in ("policy", "label"))]])
        return concat_nonempty(frames, frames[0].iloc[0:0].reset_index(drop=True))

