"""Sweeps: a grid of scenario variants x seeds, run in parallel locally or on Ray, one table with CIs.

Layering: a sweep sits above ``testbed.runner`` (each trial is one ``testbed run``); the
aggregation reads only what the trials recorded.
"""

import sys
import types

from testbed.sweep.plan import Cell, SweepPlan, Trial, plan_sweep
from testbed.sweep.spec import SweepFile, SweepSpec, load_sweep_file

__all__ = ["Cell", "SweepFile", "SweepPlan", "SweepSpec", "Trial", "load_sweep_file", "plan_sweep"]


class _CallableModule(types.ModuleType):
    """``testbed.sweep(source, ...)`` runs a sweep (:func:`testbed.api.sweep`: a sweep file, or a
    scenario with a grid and seeds), while ``testbed.sweep.plan_sweep`` and the other names stay
    this package's."""

    def __call__(self, *args, **kwargs):
        import testbed  # the package's lazy API names: the engine does not import the API layer

        return testbed._sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
