"""Interface offloads that a userspace frame relay cannot carry, and how to switch them.

In frame mode (:mod:`testbed.netem.relay.relay`, the default) a frame read by ``AF_PACKET`` loses the
skb metadata that offloads rely on, and a frame written back is a plain, fully formed frame of at
most MTU bytes. Measured on veth pairs here (kernel 6.18; ``tests/integration/test_relay.py``):

* **site-side peers, tx checksumming: must be off.** With it on, TCP/UDP frames leave with only a
  pseudo-header checksum (CHECKSUM_PARTIAL); the relay copies them verbatim and the receiving
  site drops them as corrupt: not even the TCP SYN gets through. Turning it off turns TSO off too
  (the kernel refuses TSO without checksum offload).
* **site-side peers, TSO: off** (follows from the above). A TSO frame (up to 64 KB) would cross
  the veth unsegmented and reach the relay as one oversized frame. GSO alone is harmless (the
  stack segments in software before the veth; measured) but is switched off too.
* **relay-side veths, GRO: must be off** (veth's default). Turned on, the relay receives merged
  super-frames and drops them (``dropped_oversize``; see the test).
* relay-side tx offloads and rx checksumming anywhere: harmless (frames written by the relay are
  linear, fully checksummed; measured). Switched off with the rest anyway.
* VLAN tag offload (rx-vlan-hw-parse, tx-vlan-hw-insert): a tag carried in skb metadata is not in
  the frame the relay reads. Untested (this kernel has no 8021q); switched off as a precaution.

So, frame mode: call ``set_offloads(ifname, enabled=False)`` on all four interfaces of a relayed
link (the relay's two veths in R and their two site-side peers). The cost is per-MTU-frame work
in the sites' stacks, which shaped goodput does not show (95.6% of a 100 Mbit/s tbf, the ideal).
GSO mode (``gso=True``, PACKET_VNET_HDR) carries the metadata across the relay: leave offloads on.

Done with SIOCETHTOOL (ETHTOOL_GFEATURES/SFEATURES) through ``pyroute2.ethtool``, no shelling out
to ``ethtool``; acts in the current network namespace of the calling thread.
"""

from __future__ import annotations

from pyroute2.ethtool import Ethtool

_PREFIXES = ("tx-checksum", "rx-checksum", "tx-gso-", "rx-gro", "rx-lro", "rx-udp-gro")
_EXACT = frozenset({
    "tx-generic-segmentation",
    "tx-vlan-hw-insert", "rx-vlan-hw-parse", "tx-vlan-stag-hw-insert", "rx-vlan-stag-hw-parse",
})


def is_relay_offload(name: str) -> bool:
    """True for the features ``set_offloads`` switches: checksums, segmentation, GRO/LRO, VLAN tags."""
    return name in _EXACT or name.startswith(_PREFIXES) or name.endswith("-segmentation")


def get_offloads(ifname: str) -> dict[str, bool]:
    """State of every changeable relay-relevant feature of ``ifname`` (current namespace)."""
    with Ethtool() as et:
        feats = et.get_features(ifname).features
    return {n: f.enable for n, f in feats.items() if f.available and is_relay_offload(n)}


def set_offloads(ifname: str, *, enabled: bool) -> dict[str, bool]:
    """Switch all relay-relevant offloads of ``ifname`` off (or back on); idempotent.

    Returns ``{feature: new_state}`` for the features whose state actually changed (empty when
    nothing had to change). Raises ``RuntimeError`` if, turning off, any of them stays on."""
    with Ethtool() as et:
        feats = et.get_features(ifname)
        targets = [n for n, f in feats.features.items() if f.available and is_relay_offload(n)]
        before = {n: feats.features[n].enable for n in targets}
        if any(v != enabled for v in before.values()):
            for n in targets:
                feats.features[n].enable = enabled
            et.set_features(ifname, feats)
        after_feats = et.get_features(ifname).features
    after = {n: after_feats[n].enable for n in targets}
    if not enabled and any(after.values()):
        stuck = sorted(n for n, v in after.items() if v)
        raise RuntimeError(f"{ifname}: could not turn off offloads {stuck}")
    return {n: v for n, v in after.items() if v != before[n]}
