"""The Mininet-built fabric: TCLink-style shaping applied or refused, never ignored."""

from __future__ import annotations

import psutil
import pytest

from testbed.netem.fabric import FabricError
from testbed.netem.naming import new_run_id
from testbed.netem.nsexec import ipr_in
from testbed.netem.plan import LinkInput, plan_fabric
from tests.integration.conftest import goodput_mbit

pytestmark = pytest.mark.root
mininet = pytest.importorskip("mininet.net", reason="mininet (pip mininet==2.3.0.dev6) is installed by scripts/setup.sh")


def _root_links_of(run_id: str) -> list[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return [lk.get_attr("IFLA_IFNAME") for lk in ipr.get_links() if run_id in (lk.get_attr("IFLA_IFNAME") or "")]


def test_bw_above_1000_is_applied_and_changed_in_place():
    from mininet.log import setLogLevel

    from testbed.substrate.mininet.fabric import MininetFabric

    setLogLevel("error")
    plan = plan_fabric(new_run_id(), ["a", "b", "c"],
                       [LinkInput("a", "b", 1500, 1500), LinkInput("b", "c", 50, 50)], "none")
    with MininetFabric(plan) as fab:
        g = goodput_mbit(fab.site_ns("a"), fab.site_ns("b"), fab.site_addr("b"), 150_000_000)
        assert g > 1200  # stock Mininet would have ignored bw=1500 and left the link unshaped or at 1000
        assert g < 1500 * 1.03
        g2 = goodput_mbit(fab.site_ns("a"), fab.site_ns("c"), fab.site_addr("c"), 8_000_000, port=5202)
        assert 0.94 * 50 <= g2 <= 53
        assert fab.set_rate("a", "b", 100) < 0.1
        g3 = goodput_mbit(fab.site_ns("a"), fab.site_ns("b"), fab.site_addr("b"), 15_000_000, port=5203)
        assert 0.94 * 100 <= g3 <= 103
        # the management bridge and its ports live in the switch's own namespace, as on netns: nothing of
        # the run is in the root namespace, where the host's firewall would see bridged frames
        assert _root_links_of(plan.run_id) == []
        with ipr_in(fab._ns(plan.mgmt_ns)) as n:
            br = n.link_lookup(ifname=plan.mgmt_bridge)[0]
            ports = {lk.get_attr("IFLA_IFNAME") for lk in n.get_links() if lk.get_attr("IFLA_MASTER") == br}
        assert ports == {s.mgmt_peer_if for s in plan.sites} | {plan.ctl_peer_if}
        pids = list(fab._host_pids)
    assert _root_links_of(plan.run_id) == []
    assert not [p for p in pids if psutil.pid_exists(p)]  # Mininet's host shells (and the switch's) ended


def test_refuses_what_it_cannot_apply(monkeypatch):
    from mininet.log import setLogLevel

    from testbed.substrate.mininet import fabric as mf

    setLogLevel("critical")
    # an interface class that (like stock Mininet with bw > 1000) silently applies nothing
    monkeypatch.setattr(mf, "_intf_class", lambda: __import__("mininet.link", fromlist=["TCIntf"]).TCIntf)
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 1500, 1500)], "none")
    with pytest.raises(FabricError, match="did not apply bw=1500"):
        with mf.MininetFabric(plan):
            pass
    assert _root_links_of(plan.run_id) == []
