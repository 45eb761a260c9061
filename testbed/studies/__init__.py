"""The studies ``testbed run`` runs (:class:`Study`): the migration study and the federated
(PowerTrip) study. A scenario picks its study (:func:`study_for`); the one runner
(:func:`testbed.runner.run_scenario`) drives it."""

from __future__ import annotations

from testbed.spec.load import LoadedScenario
from testbed.studies.base import PolicyRun, Study
from testbed.studies.federated import FederatedStudy
from testbed.studies.migration import MigrationStudy

STUDIES: tuple[type[Study], ...] = (FederatedStudy, MigrationStudy)


def study_class(scenario) -> type[Study]:
    """The study of ``scenario``: the first of :data:`STUDIES` that applies."""
    return next(c for c in STUDIES if c.applies(scenario))


def study_for(loaded: LoadedScenario, *, substrate: str, progress: bool = False, plots: bool = True) -> Study:
    """The study that runs this scenario on ``substrate``: the first of :data:`STUDIES` that applies."""
    return study_class(loaded.scenario)(loaded, substrate=substrate, progress=progress, plots=plots)


def summary_metrics_for(scenario) -> tuple[str, ...] | None:
    """The numeric ``summary.json`` columns of the study that runs ``scenario`` (None: not declared)."""
    return study_class(scenario).summary_metrics()


__all__ = ["STUDIES", "FederatedStudy", "MigrationStudy", "PolicyRun", "Study", "study_class", "study_for",
           "summary_metrics_for"]
