"""The mininet substrate: the emulated base (clock, link replay, movers) over a Mininet-built fabric."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.mininet.substrate import MininetSubstrate

    return MininetSubstrate(inputs, run_id=run_id)


def _unavailable(scenario):
    from testbed.substrate.emulated.preflight import live_unavailable
    from testbed.substrate.mininet.switches import substrate_switch, switch_unavailable

    switch = substrate_switch(scenario)
    why = switch_unavailable(switch)
    if why and switch != "lxbr":  # say where a switch other than the default was chosen
        why = f"emulation.switch {switch}: {why}"
    return why or live_unavailable(scenario)


def _doctor(caps):
    from testbed.doctor.report import available, first_available, latency, network_needs

    switch = first_available(caps, ("brctl", "linux_bridge"), ("ovs", "ovs"))
    needs = (network_needs(caps) + ["mininet", "mnexec"] + ([] if switch else ["linux_bridge", "brctl"])
             + ([] if available(caps, "qdisc_htb") else ["qdisc_htb"]))
    return needs, f"switch: {switch}; bandwidth: htb (TCLink); latency/jitter/loss: {latency(caps) or 'none'}"


register_substrate(SubstrateKind("mininet", "Mininet-built, root", make=_make, live=True, unavailable=_unavailable,
                                 doctor=_doctor,
                                 one_at_a_time="Mininet's switches use the machine's Open vSwitch (and its userspace "
                                               "device ovs-netdev), which runs cannot share; use netns"))


def __getattr__(name: str):
    if name == "MininetSubstrate":  # imported when asked for: listing substrates stays cheap
        from testbed.substrate.mininet.substrate import MininetSubstrate

        return MininetSubstrate
    raise AttributeError(name)


__all__ = ["MininetSubstrate"]
