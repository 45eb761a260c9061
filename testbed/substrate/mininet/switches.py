"""The Mininet switch that joins the management network, and what each needs on this machine.

- ``lxbr`` (default): Mininet's ``LinuxBridge``, started *in a namespace of its own* (the plan's
  management namespace), as the netns fabric keeps its bridge: management traffic never crosses
  the host's root namespace, so the host's firewall (bridged traffic goes through iptables while
  ``net.bridge.bridge-nf-call-iptables = 1``) cannot drop it.
- ``ovs``: Mininet's ``OVSBridge`` (Open vSwitch in standalone mode, no controller) in the root
  namespace, as Mininet runs it: the system's Open vSwitch where its ovsdb answers, else a private
  one started for the network; the kernel datapath where the openvswitch module is loaded, else
  the userspace one (:mod:`.ovs`).

:func:`switch_unavailable` answers before anything is built: Mininet itself calls ``exit(1)``
when a switch's tool is missing, which must never happen half-way through a run.
"""

from __future__ import annotations

import shutil

SWITCHES = ("lxbr", "ovs")
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path=_SBIN)


def mininet_unavailable() -> str | None:
    """Why the Mininet substrate cannot run here, or None."""
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "mininet is not installed (scripts/setup.sh installs Debian's mininet package and links it into .venv)"
    if _which("mnexec") is None:
        return "mininet's mnexec is not on PATH (scripts/setup.sh installs Mininet's tools)"
    return None


def substrate_switch(scenario) -> str:
    """The management switch of a ``--substrate mininet`` run: the scenario's ``emulation.switch``."""
    return scenario.emulation.switch


def switch_unavailable(switch: str) -> str | None:
    """Why ``switch`` cannot join a Mininet network here, or None."""
    if switch not in SWITCHES:
        return f"switch {switch!r}: choose one of {', '.join(SWITCHES)}"
    why = mininet_unavailable()
    if why:
        return why
    if switch == "lxbr":
        return None if _which("brctl") else "switch 'lxbr' needs brctl (apt-get install bridge-utils)"
    from testbed.substrate.mininet.ovs import ovs_unavailable

    return ovs_unavailable()
