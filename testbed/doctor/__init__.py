"""``testbed doctor``: what this machine can emulate, and what each missing piece means.

For people, ``testbed doctor [--json]``. For code (substrates that refuse or fall back at run
time)::

    from testbed.doctor import capabilities, has_netem
    caps = capabilities()              # {name: Capability}, every probe, in display order
    if not caps["qdisc_netem"].available: ...
    has_netem()                        # runs only that probe

Nothing is cached, on disk or in memory: every call probes again. Probes that need root report
"needs root" (``available=False``, ``measured["probed"] is False``) instead of guessing. Every
probe has a deadline; what a probe makes is named from a fresh run id and removed on every exit
path, and :func:`capabilities` finally sweeps anything of that run id still there.
"""

from __future__ import annotations

import os

from testbed.doctor import context, probes, probes_host, scratch  # noqa: F401  (probes*: the built-in probes register)
from testbed.doctor.capability import Capability, ProbeTimeout, deadline
from testbed.doctor.context import ProbeContext, ProbeSpec
from testbed.netem.owned.naming import check_run_id, new_run_id

__all__ = ["Capability", "ProbeSpec", "all_specs", "capabilities", "has_netem", "probe", "run_probe"]


def all_specs() -> dict[str, ProbeSpec]:
    """Every probe, by name, in display order (the one registry, :data:`testbed.doctor.context.PROBES`)."""
    return dict(context.PROBES.items())


def _environment_errors() -> tuple[type[BaseException], ...]:
    """Failures that describe the machine (reported); anything else is a bug (raised)."""
    import subprocess

    errors: tuple[type[BaseException], ...] = (OSError, subprocess.SubprocessError, ImportError)
    try:
        from pyroute2.netlink.exceptions import NetlinkError
    except ImportError:
        return errors
    return (*errors, NetlinkError)


def run_probe(spec: ProbeSpec, ctx: ProbeContext) -> Capability:
    """Run one probe under its deadline and say what the result means."""
    if spec.needs_root and not (ctx.is_root and ctx.root_probes):
        why = f"needs root (running as uid {os.geteuid()})" if not ctx.is_root else "not probed (need_root_probes=False)"
        hint = spec.hint(ctx) if spec.hint else ""
        return Capability(spec.name, False, f"{why}; {hint}" if hint else why,
                          f"unknown until probed as root; if absent: {spec.no}", {"probed": False, "needs_root": True})
    try:
        with deadline(spec.timeout_s):
            available, detail, measured = spec.fn(ctx)
    except ProbeTimeout as e:
        available, detail, measured = False, f"probe {e}", {"timed_out": True}
    except _environment_errors() as e:
        available, detail, measured = False, f"probe failed: {type(e).__name__}: {e}", {"error": type(e).__name__}
    return Capability(spec.name, bool(available), detail, spec.yes if available else spec.no,
                      {"probed": True, **measured})


def capabilities(*, need_root_probes: bool = True, run_id: str | None = None,
                 only: list[str] | None = None) -> dict[str, Capability]:
    """Probe this machine now. ``need_root_probes=False`` skips everything that makes kernel
    resources (those report "not probed"); ``only`` limits the probes to some names; ``run_id``
    names the throwaway resources (default: a fresh one)."""
    specs = all_specs()
    unknown = sorted(set(only or ()) - set(specs))
    if unknown:
        raise KeyError(f"unknown probe(s) {unknown}; known: {sorted(specs)}")
    ctx = ProbeContext(run_id=check_run_id(run_id) if run_id else new_run_id(), is_root=os.geteuid() == 0,
                       root_probes=need_root_probes)
    chosen = [spec for name, spec in specs.items() if only is None or name in only]
    try:
        return {spec.name: run_probe(spec, ctx) for spec in chosen}
    finally:
        if ctx.is_root and need_root_probes and any(spec.needs_root for spec in chosen):
            v1_cpu = probes_host.cgroup_mounts().get("v1_cpu")
            scratch.sweep(ctx.run_id, [v1_cpu] if v1_cpu else [])


def probe(name: str, *, run_id: str | None = None) -> Capability:
    """One capability, probed now (root probes run when root)."""
    return capabilities(only=[name], run_id=run_id)[name]


def has_netem() -> bool:
    """True only if a netem qdisc was really added here (False when not root: unknown counts as no)."""
    return probe("qdisc_netem").available
