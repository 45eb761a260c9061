"""Real model exchanges for the PowerTrip study on the netns substrate.

Sites become network namespaces joined by the scenario's links, shaped to its bandwidth (scaled:
``B x byte_scale x time_scale``) with its latency (``/ time_scale``), planned by the same
function as the migration study's substrates (:mod:`testbed.substrate.emulated.wan`). Every site runs a transfer server. In each
round, for every selected site, concurrently:

- **down**: the aggregator sends the serialized global model (``torch.save`` of the state_dict)
  plus seeded ballast up to ``update_gb x byte_scale`` bytes to the site;
- **up**: the site sends its own serialized update plus ballast back to the aggregator.

Both are chunked and SHA-256 verified by the transfer service; their wall times (connect +
transfer + verify; hashing the ballast is not part of it) become scenario seconds
(``x time_scale``). Link rates follow the bandwidth traces: at each round start every link is set
to its trace value at that scenario time. Compute time stays modelled (power trace -> capacity).
The averaging itself uses the in-process copies of the same bytes.
"""

from __future__ import annotations

import secrets
import warnings
from concurrent.futures import ThreadPoolExecutor

from testbed.errors import TestbedWarning
from testbed.federated.exchange import Exchange
from testbed.federated.roundtime import SiteTime
from testbed.inputs import Inputs
from testbed.netem.fabric import Fabric, mtu_frames
from testbed.netem.owned.naming import new_run_id
from testbed.netem.nsexec import socket_factory
from testbed.netem.qdisc import tbf_params
from testbed.netguard.gate import MAX_PENDING
from testbed.seeding import derive_seed
from testbed.substrate.emulated.wan import default_capacity_mbit, plan_wan, resolve_impairment
from testbed.transfer.client import Channel, send
from testbed.transfer.server import MAX_CONNECTIONS, TransferServer
from testbed.transfer.source import BallastSource, ConcatSource, Source

PORT = 7100
MIN_BURSTS = 10  # an update's bytes on the wire >= 10 shaper bursts: at most 10 % of it passes unshaped
KEEP_OPEN_S = 3600.0  # a kept connection waits this long for the next round (the exchange closes them all at the end)


class BytesSource(Source):
    """Bytes held in memory (a serialized model), kept by the receiver."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = bytes(data)

    @property
    def size_bytes(self) -> int:
        return len(self._data)

    @property
    def store_bytes(self) -> int:
        return 0

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > len(self._data):
            raise IndexError(f"read [{offset}, {offset + n}) outside {len(self._data)} bytes")
        return self._data[offset:offset + n]


class NetnsExchange(Exchange):
    measured = True

    def __init__(self, inputs: Inputs, *, impairment: str = "auto", run_id: str | None = None) -> None:
        self.inp = inputs
        self.sc = inputs.scenario
        self.agg = self.sc.federated.aggregator
        self.run_id = run_id or new_run_id()
        self._impairment = impairment
        self._token = secrets.token_hex(16)
        self._servers: dict[str, TransferServer] = {}
        # one kept connection per direction of each link, as a federated system keeps its sites' sessions
        # open between rounds: a round's transfers then pay no TCP connect and no challenge
        self._channels: dict[tuple[str, str], Channel] = {}
        self._rates: dict[tuple[str, str], float] = {}
        self._seq = 0
        self.fabric: Fabric | None = None
        self.scaling = None
        self.transfers: list[dict] = []
        self.burst_share: float | None = None  # the shaper's burst / an update's bytes on the wire

    def open(self) -> None:
        impairment = resolve_impairment(self._impairment)
        # every selected link may carry a transfer at once: the fastest link gets a fair share of what
        # the machine shapes accurately, so concurrent flows do not contend for CPU
        n_links = max(1, len(self.sc.links))
        capacity = max(10.0, default_capacity_mbit(impairment) * 4 / n_links)
        self.scaling, plan = plan_wan(self.inp, self.run_id, impairment=impairment, capacity_mbit=capacity)
        for li in plan.links:
            self._rates[(li.a, li.b)], self._rates[(li.b, li.a)] = li.rate_ab_mbit, li.rate_ba_mbit
        self._check_burst(plan)
        self.fabric = Fabric(plan, purpose="federated")
        self.fabric.up()
        n_sites = len(plan.sites)
        for s in plan.sites:
            # the aggregator takes every selected site's update at once (100 on us-100): room for all of
            # them, authenticated and still authenticating, rather than refusing them as busy to retry
            room = ({"max_connections": max(MAX_CONNECTIONS, n_sites), "max_pending": max(MAX_PENDING, 2 * n_sites)}
                    if s.name == self.agg else {})
            srv = TransferServer(s.addr, PORT, token=self._token, require_announced=True, keep_open_s=KEEP_OPEN_S,
                                 socket_factory=socket_factory(self.fabric.site_ns(s.name)), **room)
            srv.start()
            self._servers[s.name] = srv

    def _check_burst(self, plan) -> None:
        """Each link's shaper lets its burst through at line rate: a transfer not much larger than the
        burst is not held to the link's rate. Say so when the update's bytes on the wire are under
        :data:`MIN_BURSTS` bursts of the fastest link's shaper (its share of such a transfer is then
        over 1 / MIN_BURSTS): the measured exchanges would be shorter than the links allow."""
        update_gb = self.sc.federated.update_gb
        if not update_gb:
            return
        wire = self.scaling.bytes_sent(update_gb)
        burst = max(tbf_params(rate, mtu_frames=mtu_frames(li)).burst_bytes
                    for li in plan.links for rate in (li.rate_ab_mbit, li.rate_ba_mbit))
        self.burst_share = burst / wire if wire else 1.0
        if self.burst_share > 1.0 / MIN_BURSTS:
            warnings.warn(f"federated update transfers are {wire / 1e6:.2f} MB on the wire (update_gb x byte_scale "
                          f"{self.scaling.byte_scale:g}) against the link shaper's burst of {burst / 1024:.0f} KiB: "
                          f"up to {min(self.burst_share, 1.0):.0%} of each passes unshaped, so measured exchanges run "
                          "faster than the links; lower emulation.time_scale so that byte_scale can grow "
                          f"(summary.json: transfer_over_shaped_median shows the effect)", TestbedWarning, stacklevel=3)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
        for srv in self._servers.values():
            srv.stop()
        self._servers.clear()
        if self.fabric is not None:
            self.fabric.down()
            self.fabric = None

    def _follow_traces(self, t_s: float, sites: list[str]) -> None:
        for s in sites:
            for src, dst in ((s, self.agg), (self.agg, s)):
                old = self._rates.get((src, dst))
                new = self.scaling.rate_mbit(self.inp.bandwidth_gbps[(src, dst)].at(t_s))
                if old is None or abs(new - old) > 1e-6 * max(old, 1.0):
                    self.fabric.set_rate(src, dst, new)
                    self._rates[(src, dst)] = new

    def _source(self, payload: bytes, update_bytes: int, seed: int) -> Source:
        target = self.scaling.bytes_sent(update_bytes / 1e9)
        real = BytesSource(payload)
        if target <= len(payload):
            return real
        return ConcatSource(real, BallastSource(target - len(payload), seed=seed & 0xFFFFFFFF))

    def _send(self, src: str, dst: str, source: Source, tid: str, record: dict) -> float:
        chunk = min(1 << 20, max(16 << 10, source.size_bytes // 8))
        source.manifest(chunk)
        self._servers[dst].announce(tid, source.size_bytes)  # the receiver takes no more
        channel = self._channels.setdefault((src, dst), Channel())
        reused_before = channel.reused
        rep = send(self.fabric.site_addr(dst), PORT, source, transfer_id=tid, token=self._token, chunk_bytes=chunk,
                   socket_factory=socket_factory(self.fabric.site_ns(src)), channel=channel)
        if not rep.ok:
            raise RuntimeError(f"update transfer {tid} {src}->{dst} {rep.status}: {rep.error}")
        wall = rep.t_connect_s + rep.t_transfer_s + rep.t_verify_s
        rate = self._rates[(src, dst)]
        rtt_s = self.scaling.delay_ms(self.inp.latency_ms[(src, dst)] + self.inp.latency_ms[(dst, src)]) / 1000.0
        self.transfers.append({**record, "transfer_id": tid, "src": src, "dst": dst, "sent_bytes": rep.size_bytes,
                               "shaped_gbps": rate / 1000.0, "rtt_wall_s": rtt_s, "connect_s": rep.t_connect_s,
                               "kept_connection": channel.reused > reused_before,
                               "transfer_s": rep.t_transfer_s, "verify_s": rep.t_verify_s, "wall_s": wall,
                               # what the data phase (first byte sent to last one acknowledged) takes on the
                               # shaped link: the bytes at its rate plus one round trip
                               "shaped_transfer_s": rep.size_bytes * 8 / (rate * 1e6) + rtt_s,
                               "goodput_gbps": rep.goodput_mbps / 1000.0, "measured_s": self.scaling.scenario_s(wall),
                               "sha256": rep.sha256})
        return self.scaling.scenario_s(wall)

    def take_transfers(self) -> list[dict]:
        out, self.transfers = self.transfers, []
        return out

    def exchange(self, round_: int, t_s: float, predicted: dict[str, SiteTime], payloads: dict[str, bytes],
                 update_bytes: int) -> dict[str, tuple[float, float]]:
        """``payloads``: ``"__global__"`` -> the global model sent down, site -> its update sent up."""
        sites = list(predicted)
        self._follow_traces(t_s, sites)
        self._seq += 1
        tag = f"fl{self._seq}.r{round_}"
        down_src = {s: self._source(payloads["__global__"], update_bytes, derive_seed(0, tag, s, "down")) for s in sites}
        up_src = {s: self._source(payloads[s], update_bytes, derive_seed(0, tag, s, "up")) for s in sites}

        def record(s: str, direction: str) -> dict:
            p = predicted[s]
            return {"round": round_, "site": s, "direction": direction,
                    "predicted_s": p.down_s if direction == "down" else p.up_s}

        with ThreadPoolExecutor(max_workers=len(sites)) as pool:
            downs = {s: pool.submit(self._send, self.agg, s, down_src[s], f"{tag}.{s}.down", record(s, "down"))
                     for s in sites}
            down = {s: f.result() for s, f in downs.items()}
            ups = {s: pool.submit(self._send, s, self.agg, up_src[s], f"{tag}.{s}.up", record(s, "up")) for s in sites}
            up = {s: f.result() for s, f in ups.items()}
        return {s: (down[s], up[s]) for s in sites}

    @property
    def describe(self) -> dict:
        s = self.scaling
        return {"substrate": "netns", "run_id": self.run_id,
                "impairment": self.fabric.plan.impairment if self.fabric else None,
                **(s.to_dict() if s else {}), "fabric_up_s": self.fabric.up_s if self.fabric else None,
                "burst_share": self.burst_share,
                "comm": "measured: serialized global model / site update + ballast to update_gb x byte_scale, "
                        "sent over the shaped links (down, then up), SHA-256 verified; x time_scale",
                "compute": "modelled: power trace -> effective capacity -> samples / throughput"}
