"""The round loop of the PowerTrip study: one policy, one run, scenario time advanced by each
round's time.

Per round ``r`` starting at scenario time ``t``:

1. each participant's available power is read from its trace at ``t`` (plus the grid top-up) and
   turned into an effective capacity (:mod:`testbed.federated.capacity`); its link to the aggregator
   gives latency and the bandwidth at ``t``: the predicted compute / down / up times;
2. the policy selects sites from that view;
3. the selected sites really train (FedAvg, :mod:`testbed.federated.fedavg`) and the test accuracy
   is measured;
4. the exchange gives each selected site's down/up times: modelled (sim) or measured over shaped
   links (netns, :mod:`testbed.federated.netns_exchange`);
5. round time = the model's (straggler, pooled or pooled_eq7_as_written) over the compute and
   exchange times; ``t`` advances by it. Every model's time, and the samples it charges, are
   recorded for every round.

The centralized baseline's round is one epoch over the whole training set (one epoch-equivalent of
work, charged one epoch of compute), so it is evaluated as finely as a FedAvg round can be: a
FedAvg global model exists only after aggregation, a centralized one after every epoch. Its run may
take ``max_rounds x local_epochs`` such rounds (the same work as ``max_rounds`` all-site rounds).

Energy (per site row), in three phases of the round at that site: compute (its active nodes at
``effective_kw`` for its compute time: its own shard, ``local_epochs`` passes), communication
(``power.p_sys_kw / 2`` at the site's end while its model comes down and its update goes up, the
migration study's transfer power) and idle (its active nodes at ``p_idle_kw`` each while it waits
for the round to end: the straggler, or the pooled clock's round time). The aggregator's end of every
transfer (``p_sys_kw / 2``) is charged to a row of its own (``site`` = the aggregator, no samples).
In each phase the part up to the site's available power at the round start is renewable, the rest
is grid (the top-up). The centralized baseline has only compute.

A round with no usable site waits one trace step. The run stops at ``max_rounds``, at
``max_hours``, or ``rounds_after_target`` rounds after the target accuracy.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from testbed.federated import fedavg
from testbed.federated.capacity import SiteCapacity, site_capacity
from testbed.federated.data import Shards
from testbed.federated.exchange import GLOBAL, Exchange, ModelledExchange
from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.policies.centralized import CentralizedPolicy
from testbed.federated.roundtime import KINDS, RoundTimeModel, SiteTime, transfer_s
from testbed.federated.view import PastRound, RoundView, SiteView
from testbed.inputs import Inputs
from testbed.power.node_model import NodePower
from testbed.seeding import derive_seed
from testbed.spec.geo import great_circle_km

KM_PER_MILE = 1.609344


@dataclass
class FlRecord:
    rounds: list[dict] = field(default_factory=list)
    sites: list[dict] = field(default_factory=list)


class FederatedController:
    def __init__(self, inputs: Inputs, shards: Shards, policy: SelectionPolicy, *, round_time: str,
                 exchange: Exchange | None = None, participants: list[str], samples_per_s: float | None = None,
                 site_rates: dict[str, float] | None = None):
        """``samples_per_s``: the resolved compute speed (required when the scenario says ``measured``);
        ``site_rates``: samples/s per reference node of each site (a compute profile's; they replace
        ``samples_per_s`` for the sites they name)."""
        self.inp = inputs
        self.sc = inputs.scenario
        self.fl = self.sc.federated
        self.shards = shards
        self.policy = policy
        self.exchange = exchange or ModelledExchange()
        self.parts = participants
        self.agg = self.fl.aggregator
        c = self.fl.compute
        rate = samples_per_s if samples_per_s is not None else c.samples_per_s
        self.site_rates = dict(site_rates or {})
        if not isinstance(rate, (int, float)):
            if not self.site_rates:
                raise ValueError(f"federated.compute.samples_per_s is {rate!r}: pass samples_per_s or site_rates")
            rate = float("nan")  # every training site has its own rate
        self.samples_per_s = float(rate)
        self.model_t = RoundTimeModel(round_time, self.fl.training.local_epochs, c.data_scale, self.samples_per_s,
                                      shards.data.n_train)
        agg = self.sc.site(self.agg)
        self.nodes = {s.name: NodePower.of(self.sc.node_type_of(s.name), s.name) for s in self.sc.sites}
        self.miles = {p: great_circle_km(agg.lat_deg, agg.lon_deg, self.sc.site(p).lat_deg, self.sc.site(p).lon_deg)
                      / KM_PER_MILE for p in participants}
        self.rng = np.random.default_rng(derive_seed(inputs.seed, "fl-policy", policy.label))
        t = self.fl.training
        self.net = fedavg.make_model(t.model, hidden=t.hidden, n_classes=shards.data.n_classes, seed=inputs.seed)
        self.state = fedavg.clone_state(self.net)
        payload = fedavg.serialize(self.state)
        self.payload = payload
        self._payloads: dict[str, bytes] = {}
        self._actual: list[SiteTime] = []
        self.update_bytes = int(self.fl.update_gb * 1e9) if self.fl.update_gb else len(payload)

    # -- per round inputs ---------------------------------------------------------------------------
    def capacity(self, site: str, t_s: float, nodes: int | None = None) -> SiteCapacity:
        nodes = nodes or self.sc.site(site).nodes
        return site_capacity(site, self.nodes[site], nodes, available_kw=self.inp.renewable_kw[site].at(t_s),
                             grid_topup_kw=self.fl.grid_topup_kw, p_sys_kw=self.sc.power.p_sys_kw)

    def site_view(self, site: str, t_s: float) -> tuple[SiteView, SiteCapacity]:
        cap = self.capacity(site, t_s)
        lat = self.inp.latency_ms[(site, self.agg)]
        down = transfer_s(self.update_bytes, self.inp.bandwidth_gbps[(self.agg, site)].at(t_s), lat)
        up = transfer_s(self.update_bytes, self.inp.bandwidth_gbps[(site, self.agg)].at(t_s), lat)
        n = self.shards.n(site)
        rate = self.site_rates.get(site)
        st = SiteTime(site, n, cap.capacity, self.model_t.site_compute_s(n, cap.capacity, rate), down, up, rate)
        return SiteView(site, n, self.miles[site], cap.budget_kw, cap.power_kw, cap.capacity, lat, st), cap

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> FlRecord:
        rec = FlRecord()
        fl = self.fl
        x_test, y_test = self.shards.data.x_test, self.shards.data.y_test
        acc = fedavg.accuracy(self.net, self.state, x_test, y_test)
        t, history, after_target = 0.0, [], None
        max_s = fl.max_hours * 3600.0
        per_epoch = isinstance(self.policy, CentralizedPolicy)
        for r in range(1, fl.max_rounds * (fl.training.local_epochs if per_epoch else 1) + 1):
            if t >= max_s or (after_target is not None and after_target >= fl.rounds_after_target):
                break
            views, caps = {}, {}
            for p in self.parts:
                views[p], caps[p] = self.site_view(p, t)
            view = RoundView(r, t, acc, views, self.agg, self.update_bytes / 1e9, self.model_t, list(history), self.rng)
            sel = self.policy.select(view)
            central_nodes = getattr(self.policy, "nodes", None)
            if sel.centralized and not self.capacity(sel.centralized, t, central_nodes).usable:
                sel = Selection([], note=f"{sel.centralized}: no power for one node")
            if not sel.centralized and not sel.sites:  # nothing can train: wait one trace step
                rec.rounds.append(self._row(r, t, self.sc.step_s, sel, acc, acc, {}, 0.0))
                t += self.sc.step_s
                continue
            w0 = time.perf_counter()
            self._payloads = {GLOBAL: self.payload}
            if sel.centralized:
                round_s, site_rows = self._centralized(r, t, sel.centralized)
            else:
                self._fedavg(r, sel.sites)
            acc_after = fedavg.accuracy(self.net, self.state, x_test, y_test)
            wall = time.perf_counter() - w0
            if not sel.centralized:
                round_s, site_rows = self._times(r, t, sel.sites, views, caps)
            rec.sites += site_rows
            row = self._row(r, t, round_s, sel, acc, acc_after, {s["site"]: s for s in site_rows}, wall)
            rec.rounds.append(row)
            self.policy.observe(view, sel, acc, acc_after)
            history.append(PastRound(r, sel.k, acc_after, acc_after - acc))
            acc, t = acc_after, t + round_s
            if after_target is not None:
                after_target += 1
            elif acc >= fl.target_accuracy:
                after_target = 0
        return rec

    def _fedavg(self, r: int, sites: list[str]) -> None:
        tr = self.fl.training
        states, weights = [], []
        for s in sites:
            states.append(fedavg.local_train(self.net, self.state, self.shards.x(s), self.shards.y(s),
                                             epochs=tr.local_epochs, batch_size=tr.batch_size, lr=tr.lr,
                                             momentum=tr.momentum, seed=fedavg.round_seed(self.inp.seed, r, s)))
            weights.append(self.shards.n(s))
            if self.exchange.measured:  # the update bytes that really cross the link
                self._payloads[s] = fedavg.serialize(states[-1])
        self.state = fedavg.average(states, weights)
        self.payload = fedavg.serialize(self.state)

    def _centralized(self, r: int, t: float, site: str):
        tr, d = self.fl.training, self.shards.data
        lr = getattr(self.policy, "lr", None) or tr.lr
        self.state = fedavg.local_train(self.net, self.state, d.x_train, d.y_train, epochs=1,
                                        batch_size=tr.batch_size, lr=lr, momentum=tr.momentum,
                                        seed=fedavg.round_seed(self.inp.seed, r, site))
        cap = self.capacity(site, t, getattr(self.policy, "nodes", None))
        comp = self.model_t.centralized_s(cap.capacity, epochs=1, rate=self.site_rates.get(site))
        row = {"round": r, "site": site, "n_samples": d.n_train, "available_kw": cap.budget_kw,
               "effective_kw": cap.power_kw, "capacity": cap.capacity, "n_active": cap.n_active, "cap_w": cap.cap_w,
               "compute_s": comp, "down_s": 0.0, "up_s": 0.0, "predicted_down_s": 0.0, "predicted_up_s": 0.0,
               "comm_measured": False, "epochs": 1, **self._energy(site, t, compute=(cap.power_kw, comp))}
        return comp, [row]

    def _energy(self, site: str, t: float, compute=(0.0, 0.0), comm=(0.0, 0.0), idle=(0.0, 0.0)) -> dict:
        """Energy of the phases ((kW, s) each) at ``site`` in the round starting at ``t``: each
        phase's renewable part is up to the available power, the rest grid."""
        renewable_kw = self.inp.renewable_kw[site].at(t)
        phases = (compute, comm, idle)
        kwh = [kw * sec / 3600.0 for kw, sec in phases]
        green = sum(min(kw, max(renewable_kw, 0.0)) * sec / 3600.0 for kw, sec in phases)
        total = sum(kwh)
        grid = self.inp.grid  # carbon intensity and price of the site's grid power at the round's start
        carbon, price = grid.carbon_g_per_kwh.get(site), grid.price_per_kwh.get(site)
        return {"renewable_kw": renewable_kw, "energy_kwh": total, "compute_kwh": kwh[0], "comm_kwh": kwh[1],
                "idle_kwh": kwh[2], "renewable_kwh": green, "grid_kwh": total - green,
                "co2_kg": (total - green) * carbon.at(t) / 1000.0 if carbon is not None else float("nan"),
                "grid_cost": (total - green) * price.at(t) if price is not None else float("nan")}

    def _times(self, r, t, sites, views, caps):
        predicted = {s: views[s].time for s in sites}
        got = self.exchange.exchange(r, t, predicted, self._payloads, self.update_bytes)
        actual = [SiteTime(s, p.n_samples, p.capacity, p.compute_s, *got[s], p.rate) for s, p in predicted.items()]
        round_s = self.model_t.round_s(actual)
        end_kw = self.sc.power.p_sys_kw / 2.0  # each end of a transfer (the migration study's P_sys split)
        rows = []
        for st in actual:
            c, p = caps[st.site], predicted[st.site]
            comm_s = st.down_s + st.up_s
            idle_s = max(0.0, round_s - st.compute_s - comm_s)  # waiting for the round to end
            idle_kw = c.n_active * self.nodes[st.site].node_type.p_idle_kw
            rows.append({"round": r, "site": st.site, "n_samples": st.n_samples, "available_kw": c.budget_kw,
                         "effective_kw": c.power_kw, "capacity": c.capacity, "n_active": c.n_active, "cap_w": c.cap_w,
                         "compute_s": st.compute_s, "down_s": st.down_s, "up_s": st.up_s, "predicted_down_s": p.down_s,
                         "predicted_up_s": p.up_s, "comm_measured": bool(self.exchange.measured),
                         "epochs": self.fl.training.local_epochs,
                         **self._energy(st.site, t, compute=(c.power_kw, st.compute_s), comm=(end_kw, comm_s),
                                         idle=(idle_kw, idle_s))})
        agg_comm_s = sum(st.down_s + st.up_s for st in actual)  # the aggregator's end of every transfer
        agg = self.capacity(self.agg, t)
        rows.append({"round": r, "site": self.agg, "n_samples": 0, "available_kw": agg.budget_kw, "effective_kw": 0.0,
                     "capacity": 0.0, "n_active": 0, "cap_w": 0.0, "compute_s": 0.0, "down_s": 0.0, "up_s": 0.0,
                     "predicted_down_s": 0.0, "predicted_up_s": 0.0, "comm_measured": False, "epochs": 0,
                     **self._energy(self.agg, t, comm=(end_kw, agg_comm_s))})
        self._actual = actual
        return round_s, rows

    def _row(self, r, t, round_s, sel: Selection, acc_before, acc_after, site_rows, wall) -> dict:
        trained = int(sum(s["n_samples"] * s["epochs"] for s in site_rows.values()))
        if sel.centralized or not site_rows:
            straggler = pooled = eq7 = round_s
            charged = {k: trained for k in KINDS}
        else:
            straggler, pooled, eq7 = (self.model_t.round_s(self._actual, k) for k in KINDS)
            charged = {k: self.model_t.samples_charged(self._actual, k) for k in KINDS}
        comp = max((s["compute_s"] for s in site_rows.values()), default=0.0)
        comm = max((s["down_s"] + s["up_s"] for s in site_rows.values()), default=0.0)
        return {
            "round": r, "t_start_s": t, "t_end_s": t + round_s, "round_s": round_s, "k": sel.k if site_rows else 0,
            "sites": ",".join(sel.sites) if not sel.centralized else sel.centralized,
            "round_s_straggler": straggler, "round_s_pooled": pooled, "round_s_pooled_eq7_as_written": eq7,
            "samples_trained": trained, "epoch_equivalents": trained / self.shards.data.n_train,
            "samples_charged_straggler": charged["straggler"], "samples_charged_pooled": charged["pooled"],
            "samples_charged_pooled_eq7_as_written": charged["pooled_eq7_as_written"],
            "energy_kwh": sum(s["energy_kwh"] for s in site_rows.values()),
            "renewable_kwh": sum(s["renewable_kwh"] for s in site_rows.values()),
            "grid_kwh": sum(s["grid_kwh"] for s in site_rows.values()),
            "compute_max_s": comp, "comm_max_s": comm,
            "projected_gain": np.nan if sel.projected_gain is None else sel.projected_gain,
            "formula_gain": np.nan if sel.formula_gain is None else sel.formula_gain,
            "measured_gain": acc_after - acc_before, "accuracy_before": acc_before, "accuracy": acc_after,
            "update_bytes": self.update_bytes, "model_bytes": len(self.payload), "note": sel.note,
            "candidates": json.dumps(sel.candidates), "train_wall_s": wall,
        }
