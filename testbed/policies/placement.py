"""Choices shared by the policies: where an arriving job is queued, and which running jobs to consider moving."""

from __future__ import annotations

from testbed.controller.policy_api import ClusterView, JobView
from testbed.workload import JobSubmission


def origin_or_least_loaded(job: JobSubmission, view: ClusterView) -> tuple[str, str]:
    """The submitting site if it has a free node, else the site with most free nodes."""
    if view.free_nodes(job.origin) > 0:
        return job.origin, "origin has a free node"
    best = max(view.sites, key=lambda s: (view.free_nodes(s), -view.sites.index(s)))
    if view.free_nodes(best) > 0:
        return best, f"origin full; {best} has {view.free_nodes(best)} free node(s)"
    return job.origin, "all sites full; queued at origin"


def greenest(job: JobSubmission, view: ClusterView) -> tuple[str, str]:
    """The free site with the most renewable surplus, if any can power one more node."""
    free = [s for s in view.sites if view.free_nodes(s) > 0 and view.surplus_kw(s) >= view.p_active_kw(s)]
    if not free:
        site, why = origin_or_least_loaded(job, view)
        return site, f"no free site with renewable surplus; {why}"
    best = max(free, key=lambda s: (view.surplus_kw(s), -view.sites.index(s)))
    return best, f"largest renewable surplus ({view.surplus_kw(best):.2f} kW)"


def renewable_share(view: ClusterView, site: str) -> float:
    """R(d): the share of the site's power after one more job that its renewables cover now."""
    return min(1.0, max(0.0, view.renewable_kw(site)) / (view.load_kw(site) + view.p_active_kw(site)))


def most_renewable_share(job: JobSubmission, view: ClusterView) -> tuple[str, str]:
    """feasibility_aware's placement: among the free sites whose surplus can power one more node, the
    highest R(d), then the longest forecast window, then scenario order; else :func:`origin_or_least_loaded`."""
    powered = [s for s in view.sites if view.free_nodes(s) > 0 and view.surplus_kw(s) >= view.p_active_kw(s)]
    if not powered:
        site, why = origin_or_least_loaded(job, view)
        return site, f"no free site with renewable surplus; {why}"

    def score(s: str) -> tuple:
        return (renewable_share(view, s), view.window_forecast_s(s), -view.sites.index(s))

    best = max(powered, key=score)
    r, window_s, _ = score(best)
    return best, f"highest R(d) = {r:.3f}, then longest forecast window ({window_s / 3600:.2f} h)"


def grid_jobs_by_remaining(view: ClusterView, site: str) -> list[JobView]:
    """Jobs running on grid power at a site, the most remaining work first (most to gain)."""
    return sorted(view.jobs_on_grid(site), key=lambda j: (-j.remaining_s, j.id))
