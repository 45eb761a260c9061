"""The emulated substrate: sites joined by shaped WAN links on a live fabric, every migration's
bytes really crossing them.

- Links get the scenario's bandwidth (scaled: ``B x byte_scale x time_scale``), replayed from the
  bandwidth traces with ``tc change`` in place, and the scenario's latency/jitter/loss (scaled by
  1/time_scale) through netem where the kernel has it, else through the userspace delay relay.
  A scenario that needs latency and cannot get it fails — never silently less.
- The clock runs at ``time_scale`` while transfers are in flight and skips idle time.
- What runs at the sites and carries a migration is the run's :class:`~.mover.Mover` (seeded
  ballast or real training agents, by ``emulation.nodes``); it also starts, finishes and caps jobs.

A subclass only builds the fabric (:meth:`EmulatedSubstrate.make_fabric`): netns, mininet.
"""

from __future__ import annotations

import dataclasses
import secrets
import statistics
import sys
import threading

from testbed import step_profile
from testbed.crosstraffic.fidelity import cautions
from testbed.errors import SpecError, TestbedError
from testbed.inputs import Inputs
from testbed.lifecycle import critical
from testbed.netem import tcp_cc
from testbed.netem.crosstraffic import UNDERDELIVERED_FRAC, long_lived_share_mbit
from testbed.netem.fabric import Fabric
from testbed.netem.owned.naming import new_run_id
from testbed.netem.plan import FabricPlan
from testbed.netem.scaling import Scaling
from testbed.power.caps import CapTarget
from testbed.substrate.base import HostLoadSample, MigrationOrder, MigrationOutcome, Substrate
from testbed.substrate.emulated import agent_mover, ballast_mover  # noqa: F401  (the built-in movers register)
from testbed.substrate.emulated.clock import EmulationClock
from testbed.substrate.emulated.host_load import OTHER_CORES_MAX, STEAL_CORES_MAX, HostLoad
from testbed.substrate.emulated.mover import MOVERS, Emulation, Mover
from testbed.substrate.emulated.replay import LinkReplayer, change_points
from testbed.substrate.emulated.wan import plan_wan, resolve_impairment

_CAUTIONED: set[str] = set()
"""The run ids whose cross-traffic cautions were printed: a run opens one substrate per policy, and
says them once (its first policy's); every policy's manifest section keeps them."""

MIN_CARRIED_WALL_S = 2.0
"""A generator's counters over less wall time than this do not judge what its flows carried (their ramp)."""

_XT_COUNTERS = ("tcp_bytes", "udp_bytes", "flows_started", "flows_wanted", "wall_s", "errors")
"""The counters of a cross-traffic entry's generator the manifest keeps (summed over a run's policies)."""


class EmulatedSubstrate(Substrate):
    """Owns the fabric, the clock and the link replay; its mover owns the jobs and their moves."""

    name = "emulated"

    def make_fabric(self, plan: FabricPlan) -> Fabric:
        raise NotImplementedError

    def __init__(self, inputs: Inputs, *, impairment: str = "auto", capacity_mbit: float | None = None,
                 run_id: str | None = None, skip_idle: bool = True):
        self._in = inputs
        self.run_id = run_id or new_run_id()
        self._impairment_req = impairment
        self._capacity = capacity_mbit
        self._skip_idle = skip_idle
        self._token = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._done: list[MigrationOutcome] = []
        self._flying: dict[str, tuple[MigrationOrder, threading.Thread]] = {}
        self._changed = threading.Condition(self._lock)
        self._cancel = threading.Event()
        self._polled_to_s = 0.0  # scenario time the controller has polled up to
        self.mover: Mover = self._mover_for(inputs)
        self.fabric: Fabric | None = None
        self.scaling: Scaling | None = None
        self.clock: EmulationClock | None = None
        self._replayer: LinkReplayer | None = None
        self._xt_rows: list[dict] = []  # the cross-traffic generators' counters, sampled at every poll
        self._probe_rows: list[dict] = []  # every path probe (bandwidth_basis: probe): timing and outcome
        self._cautions: list[str] = []  # where the fabric cannot reproduce the cross-traffic (crosstraffic.fidelity)
        self._xt_warned = False  # the end-of-run warning on the cross-traffic generators was given

    @staticmethod
    def _mover_for(inputs: Inputs) -> Mover:
        nodes = inputs.scenario.emulation.nodes
        if nodes not in MOVERS:
            raise SpecError([("emulation.nodes", f"no mover is registered for {nodes!r} nodes "
                              f"(movers: {', '.join(MOVERS.names())})")])
        return MOVERS.get(nodes)(inputs)

    # -- lifecycle (``with``: Substrate's OpenClose) ---------------------------------------------
    def open(self) -> None:
        sc = self._in.scenario
        impairment = resolve_impairment(self._impairment_req)
        self.scaling, plan = plan_wan(self._in, self.run_id, impairment=impairment, capacity_mbit=self._capacity)
        self._cautions = cautions(sc, self.scaling, [j.checkpoint_gb for j in self._in.jobs])
        if self.run_id not in _CAUTIONED:  # once per run, not once per policy
            _CAUTIONED.add(self.run_id)
            for line in self._cautions:
                print(f"caution: {line}", file=sys.stderr)
        self.fabric = self.make_fabric(plan)
        self.fabric.up()
        clock = EmulationClock(self.scaling.time_scale, skip_idle=self._skip_idle)
        self.mover.start(Emulation(self._in, self.fabric, self.scaling, clock, self._token, self._cancel))
        self.clock = clock
        self.clock.start(0.0)  # scenario time begins once the nodes are ready
        self._sample_cross_traffic(0.0)  # (writes the clock file the generators' schedules follow)
        changes = change_points(self._in.bandwidth_gbps, self.scaling.rate_mbit, sc.duration_s)
        self._replayer = LinkReplayer(changes, self.clock, self.fabric.set_rate, self.fabric.release_netlink)
        self._replayer.start()

    def close(self) -> None:
        """Idempotent, and not cut short by Ctrl-C/SIGTERM (deferred until it is done); the fabric
        goes even if stopping something before it failed."""
        with critical():
            try:
                self._cancel.set()
                if self._replayer is not None:
                    self._replayer.stop()
                for _, th in list(self._flying.values()):
                    th.join(timeout=10)
                self.mover.stop()
            finally:
                if self.fabric is not None:
                    self.fabric.down()
                    if self.clock is not None and not self._xt_warned:  # a run that got going
                        self._warn_cross_traffic(self._cross_traffic_summary())  # the generators' last counters

    def _warn_cross_traffic(self, entries: list[dict]) -> None:
        """One line on stderr when a cross-traffic generator had errors or opened no flow that its
        schedule asked for (the run's load was not what the scenario says); the manifest has the counts."""
        self._xt_warned = True
        if line := cross_traffic_problems(entries):
            print(f"warning: {line}", file=sys.stderr)

    # -- the contract: jobs and caps are the mover's -------------------------------------------------
    def start_job(self, job_id: str, site: str, t_s: float) -> None:
        self.mover.start_job(job_id, site, t_s)

    def finish_job(self, job_id: str, t_s: float) -> None:
        self.mover.finish_job(job_id, t_s)

    def cap_target(self) -> CapTarget:
        """Ballast: nothing trains, caps are modelled. Agents: each job's real training can be slowed
        (the agent mover is the throughput port: ``power.backend`` emulated / emulated-throttle)."""
        return self.mover.cap_target()

    # -- the contract: migrations run in threads, reported on the clock ---------------------------
    def start_migration(self, order: MigrationOrder) -> None:
        th = threading.Thread(target=self._migrate, args=(order,), name=f"tb-migrate-{order.job_id}", daemon=True)
        with self._lock:
            self._flying[order.job_id] = (order, th)
        th.start()

    def _migrate(self, order: MigrationOrder) -> None:
        load = HostLoad().start()
        outcome = self.mover.migrate(order)
        h = load.stop()
        outcome = dataclasses.replace(outcome, host_load=HostLoadSample(
            h.host_cores, h.own_cores, h.other_cores, h.steal_cores, h.contended))
        with self._changed:
            self._flying.pop(order.job_id, None)
            self._done.append(outcome)
            self._changed.notify_all()

    def poll(self, until_s: float) -> list[MigrationOutcome]:
        assert self.clock is not None
        if self._replayer is not None and self._replayer.error is not None:
            raise TestbedError(f"link replay failed: {self._replayer.error}")
        with step_profile.part("clock"), self._changed:
            while True:
                if not self._flying and self.clock.skip_idle:
                    self.clock.jump_to(until_s)
                remaining = until_s - self.clock.now_s()
                if remaining <= 0:
                    break
                self._changed.wait(timeout=min(0.05, remaining / self.clock.time_scale))
            ready = sorted((o for o in self._done if o.resume_s <= until_s), key=lambda o: o.resume_s)
            for o in ready:
                self._done.remove(o)
            # a migration whose measured phases end before this step began (its disk I/O took less
            # scenario time scaled back to S than the emulation's clock spent on the scaled bytes)
            # resumes at the step's start: the controller has already counted the step before
            floor = self._polled_to_s
            self._polled_to_s = max(self._polled_to_s, until_s)
        self._sample_cross_traffic(until_s)
        return [o if o.resume_s >= floor else dataclasses.replace(o, resume_floor_s=floor) for o in ready]

    def _sample_cross_traffic(self, t_s: float) -> None:
        if self.fabric is None or not self.fabric.plan.cross_traffic:
            return
        from testbed.netem.crosstraffic import write_clock

        if self.clock is not None:
            try:  # the generators' on/off and trace schedules follow this run's clock
                write_clock(self.fabric.cross_traffic_clock_path(), self.clock.now_s())
            except OSError:
                pass
        for d in self.fabric.cross_traffic_stats():
            if d.get("role") == "send" and "tcp_bytes" in d:
                self._xt_rows.append({"t_s": t_s, "src": d["src"], "dst": d["dst"], "entry": d["index"],
                                      "wall_s": d.get("wall_s"), "tcp_bytes": d["tcp_bytes"], "udp_bytes": d["udp_bytes"],
                                      "flows": d["flows"], "flows_started": d["flows_started"]})

    def cross_traffic_samples(self) -> list[dict]:
        """Per control step and cross-traffic entry: what its generator had sent (wire bytes, cumulative)
        and the TCP flows it had open (the run's ``cross_traffic.parquet``)."""
        return list(self._xt_rows)

    def probe_bandwidth(self, src: str, dst: str, t_s: float, duration_s: float):
        """``bandwidth_basis: probe``: a real TCP probe from src's namespace to dst's over the fabric,
        at least :data:`testbed.netem.probe.MIN_PROBE_WALL_S` wall seconds; its measured goodput
        scaled back to scenario Gbit/s (/ byte_scale x time_scale) and to a line rate (/ TCP efficiency)."""
        from testbed.crosstraffic.predict import Probe
        from testbed.netem.probe import MIN_PROBE_WALL_S, probe_path
        from testbed.feasibility import TCP_EFFICIENCY_MTU1500

        assert self.fabric is not None and self.scaling is not None
        wall_s = max(MIN_PROBE_WALL_S, self.scaling.wall_s(duration_s))
        got = probe_path(self.fabric.site_ns(src), self.fabric.site_ns(dst), self.fabric.site_addr(dst), wall_s)
        rate = self.scaling.byte_scale * self.scaling.time_scale
        gbps = got.goodput_bps / 1e9 / rate / TCP_EFFICIENCY_MTU1500
        self._probe_rows.append({"t_s": t_s, "src": src, "dst": dst, "wall_s": got.wall_s, "connect_s": got.connect_s,
                                 "error": got.error})
        detail = f"measured: {got.goodput_bps / 1e6:.1f} Mbit/s wall over {got.wall_s:.2f} s"
        return Probe(gbps=max(gbps, 1e-6), scenario_s=self.scaling.scenario_s(got.wall_s), bytes_sent=got.bytes_sent,
                     detail=f"{detail}; {got.error}" if got.error else detail)

    def _probe_summary(self) -> dict | None:
        """The run's path probes (``bandwidth_basis: probe``): how many, how long their connections took
        to open, and every one whose path carried nothing or stalled (the manifest's)."""
        return probe_summary(self._probe_rows)

    def in_flight(self) -> list[MigrationOrder]:
        with self._lock:
            return [o for o, _ in self._flying.values()] + [o.order for o in self._done]

    def _cross_traffic_summary(self) -> list[dict]:
        """Each cross-traffic entry: what it generates and what its generator sent (the manifest's)."""
        if self.fabric is None:
            return []
        last = {d["index"]: d for d in self.fabric.cross_traffic_stats() if d.get("role") == "send"}
        share = long_lived_share_mbit(self.fabric.plan.cross_traffic, self._lowest_wire_mbit())
        out = []
        for x in self.fabric.plan.cross_traffic:
            got = last.get(x.index, {})
            entry = {"src": x.src, "dst": x.dst, "what": x.summary, **{k: got.get(k) for k in _XT_COUNTERS},
                     "last_error": got.get("last_error") or None}
            if x.index in share and got.get("tcp_bytes") is not None and (got.get("wall_s") or 0) >= MIN_CARRIED_WALL_S:
                # what its long-lived TCP flows carried, of what they should (testbed.netem.crosstraffic)
                entry["carried_frac"] = round(8 * got["tcp_bytes"] / got["wall_s"] / 1e6 / share[x.index], 3) \
                    if share[x.index] > 0 else None
            out.append(entry)
        return out

    def _lowest_wire_mbit(self) -> dict[tuple[str, str], float]:
        """Each link direction's lowest wire rate so far: as built, or a rate change the replay applied."""
        low = {}
        for link in self.fabric.plan.links:
            low[(link.a, link.b)], low[(link.b, link.a)] = link.rate_ab_mbit, link.rate_ba_mbit
        for a in (self._replayer.applied if self._replayer else []):
            key = (a["src"], a["dst"])
            low[key] = min(low.get(key, a["rate_mbit"]), a["rate_mbit"])
        return low

    def policy_part(self) -> dict:
        """What this policy's run adds to the run's manifest over all its policies
        (:meth:`over_policies`): its cross-traffic entries' counters (after :meth:`close`: the
        generators' last ones) and its path probes."""
        return {"cross_traffic": self._cross_traffic_summary(), "probe_rows": list(self._probe_rows)}

    @staticmethod
    def over_policies(parts: dict[str, dict]) -> dict:
        """The manifest's ``cross_traffic`` and ``probes`` over a run's policies (label -> its
        :meth:`policy_part`, in run order): each entry's counters summed (``last_error`` the last
        policy's that had one, with its label), the probes of all of them (each failure with its
        policy's ``label``), and each policy's own under ``by_policy.<label>``."""
        runs = list(parts.items())
        entries: list[dict] = []
        for label, part in runs:
            for i, e in enumerate(part["cross_traffic"]):
                if i == len(entries):
                    entries.append({k: e.get(k) for k in ("src", "dst", "what")} | {k: None for k in _XT_COUNTERS}
                                   | {"last_error": None})
                tot = entries[i]
                for k in _XT_COUNTERS:
                    if e.get(k) is not None:
                        tot[k] = (tot[k] or 0) + e[k]
                if e.get("last_error"):
                    tot["last_error"] = f"{label}: {e['last_error']}"
        rows = [{**r, "label": label} for label, part in runs for r in part["probe_rows"]]
        return {"cross_traffic": entries, "probes": probe_summary(rows),
                "by_policy": {label: {"cross_traffic": part["cross_traffic"], "probes": probe_summary(part["probe_rows"])}
                              for label, part in runs}}

    def describe(self) -> dict:
        """The manifest's ``substrate`` of this policy's run (a study of several policies replaces
        ``cross_traffic`` and ``probes`` by their totals over them and adds ``by_policy``:
        :meth:`over_policies`)."""
        s = self.scaling
        applied = self._replayer.applied if self._replayer else []
        live = [a for a in applied if not a["after_jump"]]
        return {
            "substrate": self.name,
            "run_id": self.run_id,
            "clock": "wall x time_scale while transfers are in flight; idle time skipped" if self._skip_idle
            else "wall x time_scale",
            "impairment": self.fabric.plan.impairment if self.fabric else None,
            "tcp_congestion": tcp_cc.effective(self.fabric.plan.tcp_congestion) if self.fabric else None,
            **(s.to_dict() if s else {}),
            "fabric_up_s": self.fabric.up_s if self.fabric else None,
            **(self.fabric.describe() if self.fabric else {}),
            "skipped_scenario_s": self.clock.skipped_s if self.clock else None,
            "cross_traffic": self._cross_traffic_summary(),
            "cross_traffic_cautions": self._cautions,
            "probes": self._probe_summary(),
            "rate_changes": len(applied),
            "rate_change_max_lag_wall_ms": max((a["lag_wall_ms"] for a in live), default=None),
            "rate_change_max_call_ms": max((a["call_ms"] for a in applied), default=None),
            **self.mover.describe(),
            "contention": (f"host CPU during each migration (psutil): contended when other processes used > "
                           f"{OTHER_CORES_MAX} core or steal > {STEAL_CORES_MAX} core on average"),
        }


def probe_summary(rows: list[dict]) -> dict | None:
    """Path probes (``bandwidth_basis: probe``): how many, how many failed, how long their connections
    took to open, and every one whose path carried nothing or stalled (with its policy's ``label``
    where the rows carry one); None without a probe."""
    if not rows:
        return None
    opened = [r["connect_s"] for r in rows if r["connect_s"] is not None]
    keys = ("label", "t_s", "src", "dst", "wall_s", "error")
    return {"n": len(rows), "failed": sum(1 for r in rows if r["error"]),
            "connect_s_median": statistics.median(opened) if opened else None,
            "connect_s_max": max(opened, default=None),
            "failures": [{k: r[k] for k in keys if k in r} for r in rows if r["error"]]}


def cross_traffic_problems(entries: list[dict]) -> str | None:
    """One line naming each cross-traffic entry (manifest form) whose generator had errors, opened no
    flow its schedule asked for, wrote no counters, or whose long-lived flows carried under
    :data:`~testbed.netem.crosstraffic.UNDERDELIVERED_FRAC` of their share; None when all ran as planned."""
    bad = []
    for i, e in enumerate(entries):
        where = f"cross_traffic[{i}] {e['src']} -> {e['dst']}"
        if e.get("tcp_bytes") is None:
            bad.append(f"{where}: its generator wrote no counters")
            continue
        what = []
        if (e.get("flows_wanted") or 0) > 0 and not e.get("flows_started"):
            what.append("opened none of the TCP flows its schedule asked for")
        if e.get("errors"):
            what.append(f"{e['errors']} error(s), last: {e.get('last_error') or '?'}")
        if e.get("carried_frac") is not None and e["carried_frac"] < UNDERDELIVERED_FRAC:
            what.append(f"its long-lived TCP flows carried {e['carried_frac']:.0%} of their share of the link on the "
                        "wire (the emulation underdelivered: a busy host?); moves on that direction met less load "
                        "than the scenario says")
        if what:
            bad.append(f"{where}: {', '.join(what)}")
    if not bad:
        return None
    return "cross-traffic did not run as the scenario says (manifest: substrate.cross_traffic): " + "; ".join(bad)
