"""How a round's model exchange happens: the federated study's counterpart of a substrate.

An :class:`Exchange` takes each selected site's predicted down/up times (the link model's) and the
bytes that cross (the global model down, each site's update up) and answers the times the round
uses. Two implementations: :class:`ModelledExchange` (the sim: the prediction is the answer) and
:class:`testbed.federated.netns_exchange.NetnsExchange` (real transfers over shaped links between network
namespaces). Each substrate's entry names the exchange the study uses on it (``federated`` in
:mod:`testbed.substrate.registry`: sim's is :func:`modelled_exchange`, netns's ``NetnsExchange``); a
substrate that names none is refused. :func:`make_exchange` builds it for a run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from testbed.federated.roundtime import SiteTime
from testbed.inputs import Inputs
from testbed.lifecycle import OpenClose
from testbed.substrate.registry import SUBSTRATES, federated_substrates

GLOBAL = "__global__"  # the payloads key of the global model sent down


class Exchange(OpenClose, ABC):
    """Lifecycle: ``with exchange: ...`` (:class:`~testbed.lifecycle.OpenClose`: ``open``, which a
    live exchange overrides, then ``close``); live resources are released on every exit path.

    ``measured``: whether the times come from real transfers (then the controller serializes each
    site's update, the bytes that cross the link)."""

    measured: bool = False

    def close(self) -> None:
        """Release every live resource this exchange owns (idempotent)."""

    @abstractmethod
    def exchange(self, round_: int, t_s: float, predicted: dict[str, SiteTime], payloads: dict[str, bytes],
                 update_bytes: int) -> dict[str, tuple[float, float]]:
        """Site -> (down_s, up_s) in scenario seconds for the selected sites of ``predicted``.
        ``payloads``: :data:`GLOBAL` -> the global model sent down, site -> its update sent up."""

    def take_transfers(self) -> list[dict]:
        """The real transfers made since the last call, one dict each (round, site, direction, bytes
        sent, the shaped rate, connect / transfer / verify wall seconds, predicted and measured scenario
        seconds); none where nothing is sent."""
        return []

    @property
    @abstractmethod
    def describe(self) -> dict:
        """For the manifest: which substrate, and what is measured vs modelled."""


class ModelledExchange(Exchange):
    """The sim: exchange times are the link model's (latency + size / bandwidth at the round start)."""

    measured = False

    def exchange(self, round_: int, t_s: float, predicted: dict[str, SiteTime], payloads: dict[str, bytes],
                 update_bytes: int) -> dict[str, tuple[float, float]]:
        return {s: (p.down_s, p.up_s) for s, p in predicted.items()}

    @property
    def describe(self) -> dict:
        return {"substrate": "sim", "comm": "modelled: latency + update bytes / bandwidth at the round start"}


def modelled_exchange(inputs: Inputs, run_id: str | None = None) -> ModelledExchange:
    """The sim's exchange (its substrate entry names it)."""
    return ModelledExchange()


def unsupported(substrate: str) -> str | None:
    """Why the federated study does not run on ``substrate``, or None."""
    if substrate in SUBSTRATES and SUBSTRATES.get(substrate).federated is not None:
        return None
    return f"the federated study runs on {' or '.join(federated_substrates())}, not {substrate!r}"


def emulated(substrate: str, inputs: Inputs) -> bool:
    """Real transfers: a live substrate and a scenario that asks for them."""
    return SUBSTRATES.get(substrate).live and inputs.scenario.federated.emulated_transfers


def make_exchange(substrate: str, inputs: Inputs, run_id: str | None) -> Exchange:
    """The exchange for this run (not yet entered): the substrate's own (its entry's ``federated``) where
    it is not live or :func:`emulated`, else modelled. ``substrate`` is one the study runs on (it refuses
    others up front, :func:`unsupported`)."""
    kind = SUBSTRATES.get(substrate)
    if kind.live and not emulated(substrate, inputs):
        return ModelledExchange()
    return kind.hook("federated")(inputs, run_id=run_id)
