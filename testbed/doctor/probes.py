"""Kernel and network probes, one small function per capability, in the order ``testbed doctor``
lists them (host tools, engines and accelerators are in :mod:`testbed.doctor.probes_host`).

A probe takes the :class:`~testbed.doctor.context.ProbeContext` and returns
``(available, detail, measured)``; its spec adds what the result means for a scenario, whether
it needs root and its deadline. Kernel probes make throwaway resources
(:mod:`testbed.doctor.scratch`) and actually use them: a qdisc counts as available only once it
has been added on a veth and read back.
"""

from __future__ import annotations

import errno
import importlib.metadata
import importlib.util
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

from testbed.doctor import scratch
from testbed.doctor.context import ProbeContext, ProbeSpec, Result, kconfig_text, probe, register_probe, tool_probe
from testbed.netem.owned.naming import if_name


# -- privileges and namespaces -------------------------------------------------------------------

@probe("root", yes="namespaces, veths, qdiscs and cgroups can be made",
       no="only --substrate sim runs; the netns, mininet and docker substrates need root")
def probe_root(ctx: ProbeContext) -> Result:
    uid = os.geteuid()
    return uid == 0, f"running as uid {uid}", {"uid": uid}


@probe("netns", needs_root=True, yes="each site gets its own network namespace",
       no="no network emulation here: only --substrate sim")
def probe_netns(ctx: ProbeContext) -> Result:
    from pyroute2 import netns

    t0 = time.perf_counter()
    with scratch.scratch_netns(ctx.run_id, "ns") as name:
        listed = name in netns.listnetns()
    gone = name not in netns.listnetns()
    ms = round((time.perf_counter() - t0) * 1000, 1)
    return listed and gone, f"created, listed and removed {name} ({ms} ms)", {"create_remove_ms": ms}


@probe("veth", needs_root=True, yes="sites are wired with veth pairs",
       no="sites cannot be wired: only --substrate sim")
def probe_veth(ctx: ProbeContext) -> Result:
    with scratch.scratch_veth(ctx.run_id, "veth") as v:
        kinds = {link.get_attr("IFLA_IFNAME"): link.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND")
                 for link in v.ipr.get_links()}
    ok = kinds.get(v.ifname) == "veth" and kinds.get(v.peer) == "veth"
    return ok, f"veth pair {v.ifname}/{v.peer} made in a scratch namespace", {"links": kinds}


# -- qdiscs --------------------------------------------------------------------------------------

def _qdisc(kind: str, tag: str, **params) -> Callable[[ProbeContext], Result]:
    def fn(ctx: ProbeContext) -> Result:
        from pyroute2.netlink.exceptions import NetlinkError

        facts: dict[str, Any] = {"kernel_config": kconfig_text(ctx, _KCONFIG[kind])}
        with scratch.scratch_veth(ctx.run_id, tag) as v:
            try:
                v.ipr.tc("add", kind, v.index, **params)
            except NetlinkError as e:
                name = errno.errorcode.get(e.code, str(e.code))
                return False, f"kernel refused `{kind}` ({name}); {facts['kernel_config']}", {**facts, "errno": name}
            seen = [q.get_attr("TCA_KIND") for q in v.ipr.get_qdiscs(v.index)]
        ok = kind in seen
        how = "added on a veth and read back" if ok else f"added, but read back {seen}"
        return ok, f"{how}; {facts['kernel_config']}", {**facts, "read_back": seen}

    return fn


_KCONFIG = {"tbf": "CONFIG_NET_SCH_TBF", "htb": "CONFIG_NET_SCH_HTB", "netem": "CONFIG_NET_SCH_NETEM",
            "fq": "CONFIG_NET_SCH_FQ", "clsact": "CONFIG_NET_SCH_INGRESS", "ingress": "CONFIG_NET_SCH_INGRESS"}
_TBF = {"rate": "100mbit", "burst": 131072, "latency": "50ms"}  # burst >= 128 KB (DESIGN: smaller can stall)


def _kconfig_hint(kind: str) -> Callable[[ProbeContext], str]:
    return lambda ctx: kconfig_text(ctx, _KCONFIG[kind])


_QDISCS = (
    ("tbf", "tbf", _TBF, "bandwidth shaping per link direction (token bucket, ~95.6% of the rate as TCP goodput)",
     "no tbf: the netns substrate shapes with htb if present, else it cannot shape bandwidth"),
    ("htb", "htb", {"default": 0x10}, "htb shaping (what Mininet's TCLink bw= uses)",
     "Mininet's TCLink bw= fails (it shapes with htb); the netns substrate needs tbf instead"),
    ("netem", "ntm", {"delay": 10000}, "latency, jitter and loss with netem on each link; Mininet's delay=/loss= work",
     "latency/jitter/loss use the userspace delay relay (testbed/netem/relay/relay.py); Mininet's `delay=` would be "
     "silently dropped, so the mininet substrate routes delay through the relay or refuses"),
    ("fq", "fq", {}, "EDT pacing: an eBPF program could set per-packet departure times",
     "eBPF EDT delays are ignored without fq, so latency cannot come from eBPF (netem or the relay instead)"),
    ("clsact", "cls", {}, "eBPF classifiers attach on clsact (random drops with TC_ACT_SHOT on ingress)",
     "no eBPF on tc: packet loss must come from netem or the relay"),
    ("ingress", "ing", {}, "ingress qdisc (policing/redirect of received traffic)",
     "no ingress qdisc: receive-side shaping via ifb/mirred is impossible; shape on the sender's egress"),
)
for _kind, _tag, _params, _yes, _no in _QDISCS:
    register_probe(ProbeSpec(f"qdisc_{_kind}", _qdisc(_kind, _tag, **_params), _yes, _no,
                             needs_root=True, hint=_kconfig_hint(_kind)))


def _tbf_rate_bps(ipr, index: int) -> int:
    for q in ipr.get_qdiscs(index):
        if q.get_attr("TCA_KIND") == "tbf":
            return 8 * q.get_nested("TCA_OPTIONS", "TCA_TBF_PARMS")["rate"]
    raise LookupError("no tbf qdisc read back")


@probe("qdisc_tbf_change", needs_root=True, hint=_kconfig_hint("tbf"),
       yes="bandwidth traces replay by changing the tbf rate in place (`tc change`, no outage)",
       no="bandwidth traces cannot change a rate in place: each step replaces the qdisc (a short outage)")
def probe_tbf_change(ctx: ProbeContext) -> Result:
    with scratch.scratch_veth(ctx.run_id, "chg") as v:
        v.ipr.tc("add", "tbf", v.index, **_TBF)
        before = _tbf_rate_bps(v.ipr, v.index)
        t0 = time.perf_counter()
        v.ipr.tc("change", "tbf", v.index, **{**_TBF, "rate": "200mbit"})
        ms = round((time.perf_counter() - t0) * 1000, 2)
        after = _tbf_rate_bps(v.ipr, v.index)
    ok = (before, after) == (100_000_000, 200_000_000)
    return ok, f"rate {before / 1e6:g} -> {after / 1e6:g} Mbit/s in {ms} ms", {
        "rate_before_bps": before, "rate_after_bps": after, "change_ms": ms}


@probe("fair_queue", needs_root=True, hint=_kconfig_hint("htb"),
       yes="a link's queue can be the per-flow fair queue (`queue: fair`, the default: htb classes, bfifos, a cls_bpf "
           "classifier under the tbf)",
       no="the netns fabric refuses links with `queue: fair` (the default): set `queue: fifo` on every link, and "
          "flows sharing a link split it unevenly (docs: cross-traffic, the link's queue)")
def probe_fair_queue(ctx: ProbeContext) -> Result:
    from testbed.netem import fairq

    with scratch.scratch_veth(ctx.run_id, "fq") as v:
        v.ipr.tc("add", "tbf", v.index, handle=0x10000, **_TBF)
        t0 = time.perf_counter()
        try:
            fairq.install(v.netns, fairq.batch(v.ifname, "1:1", 65536))
        except fairq.FairQueueError as e:
            return False, str(e), {}
        ms = round((time.perf_counter() - t0) * 1000, 1)
        kinds = [q.get_attr("TCA_KIND") for q in v.ipr.get_qdiscs(v.index)]
    ok = kinds.count("htb") == 1 and kinds.count("bfifo") == fairq.BUCKETS
    how = f"htb with {fairq.BUCKETS} bfifo classes and the classifier added under a tbf in {ms} ms" if ok \
        else f"installed, but read back {kinds.count('htb')} htb and {kinds.count('bfifo')} bfifo"
    return ok, how, {"install_ms": ms, "classes": kinds.count("bfifo")}


@probe("af_packet", needs_root=True,
       yes="the delay relay (AF_PACKET in a middle namespace) can add latency without netem",
       no="no delay relay: without netem, links get bandwidth shaping but no emulated latency")
def probe_af_packet(ctx: ProbeContext) -> Result:
    with scratch.scratch_veth(ctx.run_id, "pkt") as v:  # the block runs inside the scratch namespace
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003)) as s:  # ETH_P_ALL
            s.bind((v.ifname, 0))
    return True, f"raw AF_PACKET socket bound to {v.ifname} in a scratch namespace", {}


# -- Mininet and switches ------------------------------------------------------------------------

DEBIAN_MININET = Path("/usr/lib/python3/dist-packages/mininet")


@probe("mininet", yes="the mininet substrate can run (its switches are Linux bridges, no OpenFlow controller)",
       no="no mininet substrate: install the distribution's mininet package (apt-get install mininet; "
          "scripts/setup.sh links its Python package into .venv)")
def probe_mininet(ctx: ProbeContext) -> Result:
    spec = importlib.util.find_spec("mininet")
    facts = {"debian_package": str(DEBIAN_MININET) if DEBIAN_MININET.is_dir() else None}
    if spec is None:
        extra = f"; Debian's package is at {DEBIAN_MININET} (system python3 only)" if facts["debian_package"] else ""
        return False, f"not importable by {sys.executable}{extra}", facts
    try:
        version = importlib.metadata.version("mininet")
    except importlib.metadata.PackageNotFoundError:  # the distribution's package, linked into the venv
        version = "(the distribution's package)"
    origin = str(Path(spec.origin).parent) if spec.origin else "a namespace package"
    return True, f"mininet {version} importable from {origin}", {**facts, "version": version, "path": origin}


register_probe(ProbeSpec("mnexec", tool_probe("mnexec"), "Mininet can start hosts in namespaces",
                         "Mininet cannot start hosts: install Debian's mininet package (/usr/bin/mnexec)"))


@probe("linux_bridge", needs_root=True, yes="Linux bridges can join several links at a site (the mininet substrate's switches)",
       no="no Linux bridges: Mininet needs OVS switches, and sites cannot share one L2 segment")
def probe_linux_bridge(ctx: ProbeContext) -> Result:
    from pyroute2 import IPRoute

    with scratch.scratch_netns(ctx.run_id, "br") as ns, scratch.entered(ns), IPRoute() as ipr:
        name = if_name(ctx.run_id, "br")
        ipr.link("add", ifname=name, kind="bridge")
        kind = ipr.get_links(ipr.link_lookup(ifname=name)[0])[0].get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND")
    return kind == "bridge", f"bridge {name} made in a scratch namespace", {}


register_probe(ProbeSpec("brctl", tool_probe("brctl"), "Mininet's Linux-bridge switch can configure bridges",
                         "Mininet's Linux-bridge switch cannot configure bridges (it calls brctl): install bridge-utils"))
register_probe(ProbeSpec("ovs", tool_probe("ovs-vsctl"), "Open vSwitch switches can be used by Mininet",
                         "no Open vSwitch: the mininet substrate uses Linux bridges"))


@probe("ovs_kernel_datapath", yes="OVS switches forward in the kernel at full speed",
       no="OVS only with its userspace datapath (slow, ~1.2 Gbit/s with retransmits): the mininet substrate "
          "uses Linux bridges unless a scenario sets emulation.switch: ovs")
def probe_ovs_kernel_datapath(ctx: ProbeContext) -> Result:
    loaded = Path("/sys/module/openvswitch").is_dir() or _in_proc_modules("openvswitch")
    config = ctx.kconfig().get("CONFIG_OPENVSWITCH")
    ok = loaded or config == "y"
    where = "module openvswitch is loaded" if loaded else "no /sys/module/openvswitch"
    return ok, f"{where}; {kconfig_text(ctx, 'CONFIG_OPENVSWITCH')}", {"loaded": loaded, "kernel_config": config}


def _in_proc_modules(name: str) -> bool:
    try:
        return any(line.split()[0] == name for line in Path("/proc/modules").read_text().splitlines() if line)
    except OSError:
        return False
