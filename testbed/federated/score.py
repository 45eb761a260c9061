"""The power-to-cost score that ranks sites (our explicit version of PowerTrip's Eq. 8).

Adaptive weights by model-update size ``u`` (GB), with ``u_ref`` the size at which power and
communication weigh equally (default 1 GB):

    w_c = u / (u + u_ref)        w_p = 1 - w_c

so a small update ranks sites almost by power, a large one by their communication delay.
Score of site ``i`` (``P_i``: effective power, kW its active nodes draw, i.e. min(hardware, power
budget); ``D_i``: predicted exchange time, down + up, s):

    score_i = P_i ** w_p / D_i ** w_c

(a weighted power-to-delay ratio; it ranks like ``w_p ln P_i - w_c ln D_i``). Unusable sites
(no power to run a node) get ``-inf``. Ties break by site order.
"""

from __future__ import annotations

import math

from testbed.federated.view import RoundView, SiteView


def weights(update_gb: float, ref_gb: float = 1.0) -> tuple[float, float]:
    """(w_p, w_c)."""
    if update_gb < 0 or ref_gb <= 0:
        raise ValueError("update_gb must be >= 0 and ref_gb > 0")
    w_c = update_gb / (update_gb + ref_gb)
    return 1.0 - w_c, w_c


def score(site: SiteView, w_p: float, w_c: float) -> float:
    if not site.usable or site.effective_kw <= 0:
        return -math.inf
    delay = max(site.time.comm_s, 1e-9)
    return w_p * math.log(site.effective_kw) - w_c * math.log(delay)


def ranked(view: RoundView, ref_gb: float = 1.0) -> list[str]:
    """Usable sites, best score first."""
    w_p, w_c = weights(view.update_gb, ref_gb)
    order = list(view.sites)
    usable = [s for s in view.sites.values() if s.usable]
    return [s.name for s in sorted(usable, key=lambda s: (-score(s, w_p, w_c), order.index(s.name)))]
