"""``testbed net up|exec|set|status|down``: hold a topology up for outside tools (like Mininet's CLI)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("net", help="bring a scenario's or topology's network up, run commands in sites, tear it down")
    nsub = p.add_subparsers(dest="net_cmd", metavar="ACTION")
    nsub.required = True
    up = nsub.add_parser("up", help="build the network of a scenario or topology file and leave it up")
    up.add_argument("file", help="scenario or topology YAML")
    up.add_argument("--impairment", choices=["auto", "relay", "netem", "none"], default="auto",
                    help="how latency, jitter and loss are emulated: netem (kernel qdisc), relay (the userspace delay "
                         "relay), none, or auto (netem where the kernel has it, else the relay)")
    up.add_argument("--switch", choices=["lxbr", "ovs"], default=None,
                    help="build it with Mininet instead (this management switch: Linux bridge or Open vSwitch) and "
                         "hold it in the foreground with Mininet's CLI (`rome ping paris`); exiting the CLI tears it down")
    up.add_argument("--replay", action="store_true",
                    help="replay the scenario's bandwidth traces and degradation events on the links, in real time "
                         "x its emulation.time_scale, at the scaling an emulated run uses (a scenario file only)")
    up.add_argument("--tcp-congestion", default=None, metavar="NAME",
                    help="the sites' TCP congestion control: cubic, bbr, reno, ... or host (this machine's default); "
                         "default: the scenario's emulation.tcp_congestion, else cubic")
    up.set_defaults(func=_up)
    ch = nsub.add_parser("set", help="change a link while it is up, in place (no flow is reset)")
    ch.add_argument("link", help="link key as `testbed net status` shows it (a-b, either order)")
    ch.add_argument("--bandwidth-mbit", type=float, default=None, help="rate in Mbit/s")
    ch.add_argument("--delay-ms", type=float, default=None, help="one-way delay in ms")
    ch.add_argument("--jitter-ms", type=float, default=None, help="jitter in ms")
    ch.add_argument("--loss-pct", type=float, default=None, help="loss in percent")
    ch.add_argument("--direction", default="both", help="a->b, b->a, both (default) or SITE->SITE")
    ch.add_argument("--run", default=None, help="run id (default: the only network that is up)")
    ch.set_defaults(func=_set)
    ex = nsub.add_parser("exec", help="run a command inside a site: testbed net exec SITE -- CMD ...")
    ex.add_argument("site", help="site name (as in the scenario or topology file)")
    ex.add_argument("--run", default=None, help="run id (default: the only network that is up)")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, help="the command and its arguments, after --")
    ex.set_defaults(func=_exec)
    st = nsub.add_parser("status", help="networks that are up: sites, addresses, links, relays")
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    st.add_argument("--bench", type=Path, default=None, metavar="FILE",
                    help="shaping.json of `testbed bench shaping` with this machine's measured link capacity "
                         "(default results/bench/shaping.json; testbed's defaults where there is none)")
    st.set_defaults(func=_status)
    dn = nsub.add_parser("down", help="tear a network down")
    dn.add_argument("--run", default=None, help="run id (default: the only network that is up)")
    dn.set_defaults(func=_down)


def _pick_run(run: str | None) -> str:
    from testbed.errors import SpecError
    from testbed.netem.owned import state

    ups = [r for r in state.all_runs() if (state.read(r) or {}).get("purpose") == "net"]
    if run:
        if run not in ups:
            raise SpecError([("--run", f"no network {run!r} is up (up: {ups or 'none'})")])
        return run
    if len(ups) != 1:
        raise SpecError([("--run", f"{len(ups)} networks are up ({ups}); say which")])
    return ups[0]


def _up(args: argparse.Namespace) -> int:
    from pathlib import Path

    from testbed.errors import SpecError
    from testbed.net.held import make_live, plan_held, resolve
    from testbed.netem.fabric import Fabric, require_root
    from testbed.netem.owned.naming import new_run_id
    from testbed.netem.plan import unreachable
    from testbed.netem.tcp_cc import effective

    require_root("testbed net up")
    if args.replay and args.switch:
        raise SpecError([("--replay", "not with --switch (Mininet's CLI holds that network in the foreground)")])
    impairment = resolve(args.impairment)
    try:
        held = plan_held(Path(args.file), new_run_id(), impairment, replay=args.replay,
                         tcp_congestion=args.tcp_congestion)
    except SpecError as e:  # a problem of the file: name it first, as `validate` and `run` do
        raise e.in_file(args.file) from None
    plan = held.plan
    if args.switch:  # a Mininet network lives as long as this process: held with Mininet's CLI
        from testbed.netem.fabric import FabricError
        from testbed.substrate.mininet.switches import switch_unavailable

        if why := switch_unavailable(args.switch):
            raise FabricError(why)
        from testbed.substrate.mininet.cli import hold

        return hold(plan, args.switch)
    fab = Fabric(plan, purpose="net", detached=True)
    fab.up()  # stays up after this process exits; `testbed net down` removes it
    try:
        make_live(fab, held, detached=True)  # `net set` can change it; the replay starts
    except BaseException:
        fab.down()
        raise
    print(f"network {plan.run_id} up in {fab.up_s:.2f} s ({len(plan.sites)} sites, {len(plan.links)} links, "
          f"impairment {impairment}, TCP congestion control {effective(plan.tcp_congestion)})")
    if held.replay:
        sc = held.scaling
        print(f"  replaying {len(held.changes)} rate changes over {held.duration_s / sc.time_scale:.0f} s "
              f"(time_scale {sc.time_scale:g}, byte_scale {sc.byte_scale:.3g}); `testbed net status` shows the rates")
    for s in plan.sites:
        print(f"  {s.name:<15} ns {s.ns:<28} addr {s.addr:<15} mgmt {s.mgmt_addr}")
    for line in cross_traffic_lines([{"src": x.src, "dst": x.dst, "what": x.summary} for x in plan.cross_traffic],
                                    replayed=held.replay):
        print(line)
    if unreachable(plan):
        print(f"  warning: unreachable pairs: {unreachable(plan)[:5]}")
    print(f"run commands with: testbed net exec SITE -- CMD   (e.g. testbed net exec {plan.sites[0].name} -- ping -c 3 "
          f"{plan.sites[-1].addr})")
    return 0


def _exec(args: argparse.Namespace) -> int:
    from testbed.errors import SpecError
    from testbed.netem.owned import state

    cmd = list(args.cmd)
    while cmd[:1] and cmd[0].startswith("--run"):  # `exec SITE --run ID -- CMD`: REMAINDER took it
        if cmd[0] == "--run" and len(cmd) > 1:
            args.run, cmd = cmd[1], cmd[2:]
        elif cmd[0].startswith("--run="):
            args.run, cmd = cmd[0].split("=", 1)[1], cmd[1:]
        else:
            raise SpecError([("--run", "needs a run id")])
    cmd = cmd[1:] if cmd[:1] == ["--"] else cmd
    if not cmd:
        raise SpecError([("CMD", "give a command after --, e.g. testbed net exec rome -- ping -c 3 10.200.0.2")])
    run = _pick_run(args.run)
    sites = (state.read(run) or {}).get("sites", {})
    if args.site not in sites:
        raise SpecError([("SITE", f"unknown site {args.site!r} in network {run} (sites: {sorted(sites)})")])
    from testbed.netem.nsexec import _enter

    _enter(sites[args.site]["ns"])
    sys.stdout.flush()
    try:
        os.execvp(cmd[0], cmd)
    except FileNotFoundError:
        raise SpecError([("CMD", f"command not found: {cmd[0]}")]) from None


def _set(args: argparse.Namespace) -> int:
    from testbed.netem.fabric import require_root
    from testbed.netem.live import LinkChange, LiveNet

    require_root("testbed net set")
    run = _pick_run(args.run)
    ch = LinkChange(args.bandwidth_mbit, args.delay_ms, args.jitter_ms, args.loss_pct, args.direction)
    lk = LiveNet(run).set(args.link, ch)
    print(live_link_line(lk))
    return 0


def live_link_line(lk: dict) -> str:
    """One link's current values, per direction (``a->b`` first)."""
    from testbed.netem.live import current

    v = current(lk)
    parts = []
    for d, (src, dst) in (("ab", (lk.get("a", "a"), lk.get("b", "b"))), ("ba", (lk.get("b", "b"), lk.get("a", "a")))):
        parts.append(f"{src}->{dst} {v[f'rate_{d}_mbit']:g} Mbit/s delay {v[f'delay_{d}_ms']:g} ms "
                     f"jitter {v[f'jitter_{d}_ms']:g} ms loss {v[f'loss_{d}_pct']:g} %")
    return f"link {lk['key']}: " + "; ".join(parts)


def _asymmetric(lk: dict) -> bool:
    """Delay, jitter or loss differ by direction (`net set --direction`): one line cannot say them."""
    return any(lk.get(f"{k}_ab_{u}", 0) != lk.get(f"{k}_ba_{u}", 0)
               for k, u in (("delay", "ms"), ("jitter", "ms"), ("loss", "pct")))


def _status(args: argparse.Namespace) -> int:
    import json

    from testbed.netem.owned import state

    out = []
    for run in state.all_runs():
        st = state.read(run) or {}
        replay_pid = (st.get("replay") or {}).get("pid") if isinstance(st.get("replay"), dict) else None
        st["pids"] = [p for p in st.get("pids", []) if p != replay_pid]  # relays and generators (the replay: below)
        st.update(_processes_alive(st))
        if replay_pid:
            st["replay"]["alive"] = state.pid_alive(int(replay_pid))
        out.append(with_capacity(st, args.bench))
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    if not out:
        print("no testbed network is up")
    for line in status_lines(out):
        print(line)
    return 0


def _processes_alive(st: dict) -> dict:
    """How many of a network's relays and cross-traffic generators (a sink per receiving site, a
    sender per entry: ``st["cross_traffic"]``) are alive; a generator is told by its command line."""
    import psutil

    from testbed.netem.crosstraffic import GENERATOR_MODULE
    from testbed.netem.owned import state

    entries = st.get("cross_traffic") or []
    generators = len(entries) + len({x.get("dst") for x in entries})
    relays_alive = generators_alive = 0
    for pid in st.get("pids", []):
        if not state.pid_alive(int(pid)):
            continue
        try:
            is_generator = GENERATOR_MODULE in " ".join(psutil.Process(int(pid)).cmdline())
        except psutil.Error:
            continue
        generators_alive += is_generator
        relays_alive += not is_generator
    return {"relays_alive": relays_alive, "relays": max(0, len(st.get("pids", [])) - generators),
            "generators_alive": generators_alive, "generators": generators}


def cross_traffic_lines(entries: list[dict], *, replayed: bool) -> list[str]:
    """One line per cross-traffic entry a network generates, and what its rates are."""
    if not entries:
        return []
    how = ("scaled as in an emulated run" if replayed else
           "at the scenario's rates (unscaled: --replay scales them as a run does)")
    return [f"  cross-traffic, {how}:"] + [f"    {x['src']} -> {x['dst']}: {x['what']}" for x in entries]


OVER_CAPACITY_TOLERANCE = 1.1
"""A link is warned about above this x the machine's capacity (a run's traces vary around a rate
scaled to fit it)."""


def with_capacity(st: dict, bench: Path | None) -> dict:
    """Each link of a state entry with ``capacity_mbit`` (what this machine can give it) and where
    that number comes from (testbed/bench/capacity.py)."""
    from testbed.bench.capacity import link_capacity

    links = []
    for lk in st.get("links", []):
        delayed = bool(lk.get("delay_ms") or lk.get("jitter_ms") or lk.get("loss_pct"))
        cap = link_capacity(st.get("impairment"), delayed, bench)
        links.append({**lk, "capacity_mbit": cap.mbit, "capacity_source": cap.source})
    return {**st, "links": links}


def status_lines(states: list[dict]) -> list[str]:
    lines = []
    for st in states:
        gens = (f", cross-traffic generators alive {st['generators_alive']}/{st['generators']}"
                if st.get("generators") else "")
        lines.append(f"{st['run_id']} ({st.get('purpose')}, owner pid {st.get('owner_pid')}, since {st.get('created_utc')}, "
                     f"impairment {st.get('impairment')}, relays alive {st['relays_alive']}/{st.get('relays', len(st.get('pids', [])))}"
                     f"{gens})")
        for name, s in sorted(st.get("sites", {}).items()):
            lines.append(f"  site {name:<15} {s['addr']:<15} ns {s['ns']}")
        over = []
        for lk in st.get("links", []):
            cap = lk.get("capacity_mbit")
            if _asymmetric(lk):  # changed live in one direction: its current values, per direction
                lines.append(f"  {live_link_line(lk)}" + (f"  (machine: ~{cap:.0f} Mbit/s)" if cap else ""))
                if cap and max(lk["rate_ab_mbit"], lk["rate_ba_mbit"]) > cap * OVER_CAPACITY_TOLERANCE:
                    over.append(lk)
                continue
            lines.append(f"  link {lk['key']:<25} {lk['rate_ab_mbit']:g}/{lk['rate_ba_mbit']:g} Mbit/s  "
                         f"delay {lk['delay_ms']:.2f} ms  jitter {lk['jitter_ms']:g} ms  loss {lk['loss_pct']:g} %"
                         + (f"  (machine: ~{cap:.0f} Mbit/s)" if cap else ""))
            if cap and max(lk["rate_ab_mbit"], lk["rate_ba_mbit"]) > cap * OVER_CAPACITY_TOLERANCE:
                over.append(lk)
        lines += [f"  cross-traffic {x['src']} -> {x['dst']}: {x['what']}" for x in st.get("cross_traffic") or []]
        rp = st.get("replay")
        if isinstance(rp, dict):
            last = rp.get("last") or {}
            lines.append(f"  replay: {rp.get('applied', 0)}/{rp.get('changes', 0)} changes applied"
                         + (" (done)" if rp.get("done") else " (replay process gone)" if rp.get("alive") is False else "")
                         + f", time_scale {rp.get('time_scale')}"
                         + (f", last {last['src']}->{last['dst']} {last['rate_mbit']:g} Mbit/s at t={last['t_s']:g} s"
                            if last else ""))
        if over:
            cap, src = over[0]["capacity_mbit"], over[0]["capacity_source"]
            names = ", ".join(lk["key"] for lk in over[:5]) + (f" and {len(over) - 5} more" if len(over) > 5 else "")
            lines.append(f"  warning: {names}: configured above what this machine can carry (~{cap:.0f} Mbit/s, "
                         f"{src}); achieved rates will fall short of the configured ones: emulate such links "
                         "scaled (a scenario's emulation.time_scale and byte_scale)")
    return lines


def _down(args: argparse.Namespace) -> int:
    from testbed.netem.owned.clean import clean_run
    from testbed.netem.fabric import require_root

    require_root("testbed net down")
    run = _pick_run(args.run)
    r = clean_run(run, force=True)
    print(f"network {run} down: removed {len(r.namespaces)} namespace(s), stopped {len(r.pids)} process(es) "
          "(relays, cross-traffic generators)")
    return 0
