"""Whether a scenario reproduces the migration paper's setup, so that the paper's claims may be judged on it.

A scenario's name says nothing (a user may call anything ``paper-...``), so the test is structural,
on the resolved scenario recorded in the run's manifest. The paper (arXiv 2511.16182) evaluates a
migration study of **5 sites over 7 days (168 h)** comparing **Static** with **Feasibility-aware
at alpha = 0.1** (and Energy-only). A scenario reproduces that setup when all of these hold:

- it is a migration study (``workloads``, no ``federated``);
- it has exactly 5 sites and lasts 168 h;
- its policies include ``static`` and ``feasibility_aware``, and the first ``feasibility_aware``
  plans with alpha = 0.1.

What the paper leaves open (renewable capacity, bandwidth degradation, forecast error, the job mix)
may vary: sweeps over those judge the claims per cell. Anything else is a user scenario: it gets
the comparison table, not the paper's claims.
"""

from __future__ import annotations

import math

PAPER_SITES = 5
PAPER_DURATION_H = 168.0
PAPER_ALPHA = 0.1


def paper_setup(resolved: dict | None) -> tuple[bool, str]:
    """(does ``resolved`` reproduce the paper's setup, why not / what matched)."""
    if not isinstance(resolved, dict) or not resolved:
        return False, "no resolved scenario recorded"
    if resolved.get("workloads") is None or resolved.get("federated") is not None:
        return False, "not a migration study"
    sites = resolved.get("sites") or []
    if len(sites) != PAPER_SITES:
        return False, f"{len(sites)} sites (the paper's setup has {PAPER_SITES})"
    hours = float(resolved.get("duration_h") or 0.0)
    if not math.isclose(hours, PAPER_DURATION_H):
        return False, f"{hours:g} h (the paper's setup runs {PAPER_DURATION_H:g} h)"
    policies = [p for p in resolved.get("policies") or [] if isinstance(p, dict)]
    names = [p.get("name") for p in policies]
    missing = [n for n in ("static", "feasibility_aware") if n not in names]
    if missing:
        return False, f"no {' and no '.join(missing)} policy"
    fa = next(p for p in policies if p.get("name") == "feasibility_aware")
    alpha = fa.get("alpha")
    if alpha is None:
        alpha = (resolved.get("feasibility") or {}).get("alpha")
    if alpha is None or not math.isclose(float(alpha), PAPER_ALPHA):
        return False, f"feasibility_aware plans with alpha {alpha} (the paper's is {PAPER_ALPHA:g})"
    return True, f"{PAPER_SITES} sites, {PAPER_DURATION_H:g} h, static vs feasibility_aware at alpha {PAPER_ALPHA:g}"
