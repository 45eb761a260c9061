"""Choices several commands share, listed in ``--help`` and checked (with a "did you mean") by argparse."""

from __future__ import annotations

from testbed.substrate import substrate_choices


class SubstrateChoices:
    """The registered substrates and ``auto``, read when argparse checks or lists them (a substrate
    registered after the parser was built is still a choice)."""

    def __contains__(self, name: object) -> bool:
        return name in substrate_choices()

    def __iter__(self):
        return iter(substrate_choices())
