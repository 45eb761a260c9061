"""The local substrate (:mod:`testbed.substrate.local`): the emulated substrate's clock, mover and
node agents on a :class:`HostFabric`, which builds nothing: its one site is this host's own network
namespace (:data:`testbed.netem.nsexec.HOST`), the agent listens on the loopback address."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import tempfile

from testbed.lifecycle import critical
from testbed.netem.owned import state
from testbed.netem.fabric import Fabric, FabricError
from testbed.netem.nsexec import HOST
from testbed.netem.plan import FabricPlan
from testbed.substrate.emulated.base import EmulatedSubstrate

LOOPBACK = "127.0.0.1"


def local_unavailable(scenario) -> str | None:
    """Why ``scenario`` cannot run on the local substrate, or None (asked before anything is built)."""
    from testbed.node_kinds import NODE_KINDS

    if len(scenario.sites) != 1 or scenario.links:
        return (f"the local substrate runs one site and no links (this scenario: {len(scenario.sites)} sites, "
                f"{len(scenario.links)} links): use --substrate netns")
    em = scenario.emulation  # its runtime (process only) is the registry's check: SubstrateKind.runtimes
    kind = NODE_KINDS.get(em.nodes)
    missing = [m for m in kind.requires_modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"nodes {kind.name!r} need {', '.join(missing)}, which is not installed"
    return None


class HostFabric(Fabric):
    """A fabric of one site that is this host: no namespace, no interface, no link. Its agent's
    addresses are the loopback's; its temp folder is listed in the run's state file as any fabric's."""

    def __init__(self, plan: FabricPlan, *, purpose: str = "run"):
        if len(plan.sites) != 1 or plan.links:
            raise FabricError("a host fabric has one site and no links")
        site = dataclasses.replace(plan.sites[0], ns=HOST, addr=LOOPBACK, mgmt_addr=LOOPBACK)
        super().__init__(dataclasses.replace(plan, sites=(site,), mgmt_ns=HOST, ctl_ns=HOST), purpose=purpose)

    def up(self) -> None:
        self._tmp = os.path.join(tempfile.gettempdir(), os.path.basename(self._tmp))
        with critical():
            state.add(self.plan.run_id, purpose=self.purpose, info=self._info(), tmp_dirs=[self._tmp])
            os.mkdir(self._tmp, 0o700)
        self.up_s = 0.0

    def down(self) -> None:
        with critical():
            shutil.rmtree(self._tmp, ignore_errors=True)
            state.discard(self.plan.run_id, tmp_dirs=[self._tmp])

    def _ns(self, name: str) -> str:
        return HOST

    def set_rate(self, src: str, dst: str, rate_mbit: float) -> float:
        raise FabricError("a host fabric has no links to shape")

    def describe(self) -> dict:
        return {"fabric": "host: one site in this host's own network namespace, its agent on the loopback"}


class LocalSubstrate(EmulatedSubstrate):
    """One site, its node agent a local process (``--substrate local``)."""

    name = "local"

    def __init__(self, inputs, *, run_id: str | None = None):
        super().__init__(inputs, impairment="none", run_id=run_id)  # no link: nothing to impair

    def make_fabric(self, plan: FabricPlan) -> Fabric:
        return HostFabric(plan)
