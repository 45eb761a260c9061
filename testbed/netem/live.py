"""Change a held network's links while they are up (``testbed net set``, ``wan.set``, the replay).

Every change is made in place, so flows carry on: bandwidth with ``tc change`` of the sender-side
tbf; delay, jitter and loss with ``tc change`` of the root netem qdisc where the kernel has netem,
else by the link's userspace delay relay, which re-reads its control file on SIGUSR1
(:mod:`testbed.netem.relay.relay`). The current values of every link, per direction, are kept in the
run's state file (``/run/testbed/<run>.json``: ``links`` for the values, ``live`` for what is needed
to change them), which ``testbed net status`` shows.

Directions are ``a->b``, ``b->a`` or ``both``, where a and b are the ends of the link's key
(``rome-milan``: a = rome), or ``SITE->SITE``.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from testbed.errors import SpecError
from testbed.netem.owned import state
from testbed.netem.qdisc import MAX_RATE_MBIT, MIN_RATE_MBIT

DIRS = ("ab", "ba")
FIELDS = ("rate", "delay", "jitter", "loss")
UNIT = {"rate": "mbit", "delay": "ms", "jitter": "ms", "loss": "pct"}


def field(kind: str, d: str) -> str:
    """State key of one direction's value: ``rate_ab_mbit``, ``delay_ba_ms``, ``loss_ab_pct``..."""
    return f"{kind}_{d}_{UNIT[kind]}"


@dataclass(frozen=True)
class LinkChange:
    """What to change (None: leave as it is), in which direction."""

    bandwidth_mbit: float | None = None
    delay_ms: float | None = None
    jitter_ms: float | None = None
    loss_pct: float | None = None
    direction: str = "both"

    def values(self) -> dict[str, float]:
        given = {"rate": self.bandwidth_mbit, "delay": self.delay_ms, "jitter": self.jitter_ms, "loss": self.loss_pct}
        return {k: float(v) for k, v in given.items() if v is not None}


def check_change(ch: LinkChange) -> None:
    """SpecError naming the bad option (CLI spelling) when a value is out of range or none is given."""
    vals = ch.values()
    if not vals:
        raise SpecError([("LINK", "nothing to change: give --bandwidth-mbit, --delay-ms, --jitter-ms or --loss-pct")])
    for kind, v in vals.items():
        opt = {"rate": "--bandwidth-mbit", "delay": "--delay-ms", "jitter": "--jitter-ms", "loss": "--loss-pct"}[kind]
        if not math.isfinite(v):
            raise SpecError([(opt, f"must be a finite number, got {v}")])
        if kind == "rate" and not MIN_RATE_MBIT <= v <= MAX_RATE_MBIT:
            raise SpecError([(opt, f"must be in [{MIN_RATE_MBIT}, {MAX_RATE_MBIT}] Mbit/s, got {v:g}")])
        if kind in ("delay", "jitter") and not 0 <= v <= 60_000:
            raise SpecError([(opt, f"must be in [0, 60000] ms, got {v:g}")])
        if kind == "loss" and not 0 <= v <= 100:
            raise SpecError([(opt, f"must be in [0, 100] %, got {v:g}")])


def resolve_link(links: list[dict], name: str) -> dict:
    """The state entry of link ``name`` (its key ``a-b``, in either order)."""
    for lk in links:
        if name == lk["key"] or name == f"{lk['b']}-{lk['a']}":
            return lk
    raise SpecError([("LINK", f"unknown link {name!r} (links: {', '.join(lk['key'] for lk in links) or 'none'})")])


def directions(lk: dict, direction: str) -> list[str]:
    """``ab``/``ba`` for a direction given as a->b, b->a, both or SITE->SITE."""
    d = direction.replace(" ", "")
    if d == "both":
        return list(DIRS)
    if d in ("a->b", "b->a"):
        return ["ab" if d == "a->b" else "ba"]
    src, sep, dst = d.partition("->")
    if sep and (src, dst) == (lk["a"], lk["b"]):
        return ["ab"]
    if sep and (src, dst) == (lk["b"], lk["a"]):
        return ["ba"]
    raise SpecError([("--direction", f"{direction!r}: use a->b, b->a, both, {lk['a']}->{lk['b']} or {lk['b']}->{lk['a']}")])


def current(lk: dict) -> dict[str, float]:
    """Per-direction values of a state link entry (entries written at `net up` have one delay, jitter
    and loss for both directions)."""
    out = {}
    for d in DIRS:
        out[field("rate", d)] = float(lk[f"rate_{d}_mbit"])
        for kind, plain in (("delay", "delay_ms"), ("jitter", "jitter_ms"), ("loss", "loss_pct")):
            out[field(kind, d)] = float(lk.get(field(kind, d), lk.get(plain, 0.0)))
    return out


def updated(lk: dict, ch: LinkChange) -> dict[str, float]:
    """The link's per-direction values after ``ch`` (pure)."""
    new = current(lk)
    for d in directions(lk, ch.direction):
        for kind, v in ch.values().items():
            new[field(kind, d)] = v
    return new


def impairment_problem(lk: dict, live: dict, impairment: str, old: dict, new: dict) -> str | None:
    """Why the delay/jitter/loss change ``old`` -> ``new`` cannot be made in place, or None."""
    keys = [field(k, d) for k in ("delay", "jitter", "loss") for d in DIRS]
    if all(old[k] == new[k] for k in keys):
        return None
    if live.get("relay_pid"):
        if (live.get("relay_gso") and not live.get("relay_gso_loss")
                and (new[field("loss", "ab")] or new[field("loss", "ba")])):
            return (f"link {lk['key']}: its delay relay carries GSO super-frames (built without loss, above "
                    "400 Mbit/s) and cannot drop single packets; loss cannot be set on it (the compiled relay can)")
        return None
    if impairment == "netem" and live.get("netem"):
        return None
    return (f"link {lk['key']} was built without a delay stage (no latency, jitter or loss, or impairment "
            f"{impairment}); delay, jitter and loss can only be changed in place on links built with one: "
            "give the link a latency in the file")


# -- the state file, read-modify-write across processes --------------------------------------------

@contextmanager
def locked() -> Iterator[None]:
    """Serialise changes of held networks between processes (``net set``, a replay, a notebook): an
    exclusive flock on the state directory."""
    state.STATE_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(state.STATE_DIR, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def live_info(fab) -> dict:
    """What a held network needs to change its links later (recorded under ``live`` at `net up`)."""
    from testbed.netem.fabric import mtu_frames

    plan = fab.plan
    pids = fab.relay_pids()
    links = {}
    for lk in plan.links:
        under_netem = fab._netem(lk) is not None
        handle, parent = fab._tbf_handle(lk)
        links[lk.key] = {"ns_a": fab.site_ns(lk.a), "ns_b": fab.site_ns(lk.b), "if_a": lk.if_a, "if_b": lk.if_b,
                         "tbf_handle": handle, "tbf_parent": parent, "netem": under_netem,
                         "tbf_mtu_frames": mtu_frames(lk),
                         "relay_pid": pids.get(lk.key), "relay_gso": bool(lk.relay_ns) and _gso(lk),
                         # the compiled relay drops single segments of a super-frame
                         "relay_gso_loss": bool(lk.relay_ns) and _gso(lk) and _compiled(),
                         "relay_control": fab.relay_control_path(lk) if lk.relay_ns else None}
    return {"links": links}


def _compiled() -> bool:
    from testbed.netem.relay import fastrelay

    return fastrelay.available()


def _gso(lk) -> bool:
    from testbed.netem.fabric import relay_gso

    return relay_gso(lk)


def record_live(fab, extra: dict | None = None) -> None:
    """Add the live info (and ``extra``) of a fabric that is up to its state file; and a, b per link."""
    with locked():
        st = state.load(fab.plan.run_id)
        ends = {lk.key: (lk.a, lk.b) for lk in fab.plan.links}
        links = [{**lk, "a": ends[lk["key"]][0], "b": ends[lk["key"]][1], **current(lk)} for lk in st.get("links", [])]
        state.add(fab.plan.run_id, purpose=st["purpose"], info={"links": links, "live": live_info(fab), **(extra or {})})


# -- applying a change ------------------------------------------------------------------------------

class LiveNet:
    """Change the links of the held network ``run_id`` (any process may, as root)."""

    def __init__(self, run_id: str):
        self.run_id = run_id

    def _state(self) -> dict:
        st = state.read(self.run_id)
        if st is None:
            raise SpecError([("--run", f"no network {self.run_id!r} is up")])
        if "live" not in st:
            raise SpecError([("--run", f"network {self.run_id} cannot be changed live (it was not built by "
                                       "`testbed net up` or testbed.net.up)")])
        return st

    def links(self) -> list[dict]:
        return self._state().get("links", [])

    def set(self, link: str, change: LinkChange) -> dict:
        """Apply ``change`` to ``link`` in place; returns the link's new state entry."""
        check_change(change)
        with locked():
            st = self._state()
            lk = resolve_link(st.get("links", []), link)
            live = st["live"]["links"][lk["key"]]
            old, new = current(lk), updated(lk, change)
            why = impairment_problem(lk, live, st.get("impairment", "none"), old, new)
            if why:
                raise SpecError([("LINK", why)])
            self._apply(lk, live, st.get("impairment", "none"), old, new)
            entry = {**lk, **new, "changed_unix": time.time()}
            entry.update(delay_ms=max(new[field("delay", d)] for d in DIRS),
                         jitter_ms=max(new[field("jitter", d)] for d in DIRS),
                         loss_pct=max(new[field("loss", d)] for d in DIRS))
            st["links"] = [entry if x["key"] == lk["key"] else x for x in st["links"]]
            state.write(self.run_id, st)
            return entry

    def warm(self) -> None:
        """Import and open what a change needs once, so the first timed change is not late by it."""
        from testbed.netem.nsexec import ipr_in
        from testbed.netem.qdisc import change_rate, tbf_params  # noqa: F401

        live = self._state()["live"]["links"]
        for lk in list(live.values())[:1]:
            with ipr_in(lk["ns_a"]) as ipr:
                ipr.link_lookup(ifname=lk["if_a"])

    def set_rate(self, src: str, dst: str, rate_mbit: float) -> float:
        """The replay's hook: src->dst bandwidth; returns the seconds the change took."""
        t0 = time.perf_counter()
        self.set(f"{src}-{dst}", LinkChange(bandwidth_mbit=rate_mbit, direction=f"{src}->{dst}"))
        return time.perf_counter() - t0

    def _apply(self, lk: dict, live: dict, impairment: str, old: dict, new: dict) -> None:
        from testbed.netem.nsexec import ipr_in
        from testbed.netem.qdisc import change_rate, netem_params, tbf_params

        rtt = new[field("delay", "ab")] + new[field("delay", "ba")]
        for d in DIRS:
            ns, ifname = (live["ns_a"], live["if_a"]) if d == "ab" else (live["ns_b"], live["if_b"])
            rate_changed = old[field("rate", d)] != new[field("rate", d)]
            imp_changed = any(old[field(k, d)] != new[field(k, d)] for k in ("delay", "jitter", "loss"))
            if not rate_changed and not (imp_changed and live.get("netem")):
                continue
            with ipr_in(ns) as ipr:
                idx = ipr.link_lookup(ifname=ifname)
                if not idx:
                    raise SpecError([("LINK", f"link {lk['key']}: interface {ifname} is gone from {ns}")])
                if imp_changed and live.get("netem"):  # the root netem of the sender side, in place
                    p = netem_params(new[field("delay", d)], new[field("jitter", d)], new[field("loss", d)],
                                     max(new[field("rate", x)] for x in DIRS))
                    ipr.tc("change", "netem", index=idx[0], handle="1:", **p.kwargs())
                if rate_changed:
                    change_rate(ipr, idx[0], tbf_params(new[field("rate", d)], rtt,
                                                        mtu_frames=bool(live.get("tbf_mtu_frames"))),
                                handle=live["tbf_handle"], parent=live["tbf_parent"])
        if live.get("relay_pid") and any(old[field(k, d)] != new[field(k, d)]
                                         for k in ("delay", "jitter", "loss") for d in DIRS):
            self._tell_relay(lk, live, new)

    def _tell_relay(self, lk: dict, live: dict, new: dict) -> None:
        pid, path = int(live["relay_pid"]), live["relay_control"]
        if self.run_id not in state.pid_cmdline(pid):  # never signal a PID that is no longer ours
            raise SpecError([("LINK", f"link {lk['key']}: its delay relay (pid {pid}) is not running")])
        body = {("a_to_b" if d == "ab" else "b_to_a"): {"delay_ms": new[field("delay", d)],
                                                        "jitter_ms": new[field("jitter", d)],
                                                        "loss_pct": new[field("loss", d)]} for d in DIRS}
        tmp = f"{path}.tmp{os.getpid()}"
        Path(tmp).write_text(json.dumps(body))
        os.replace(tmp, path)
        os.kill(pid, signal.SIGUSR1)
