"""lifecycle.OpenClose: the one ``with`` idiom of substrates, model exchanges and cap enforcers."""

import pytest

from testbed.federated.exchange import Exchange
from testbed.federated.netns_exchange import NetnsExchange
from testbed.lifecycle import OpenClose
from testbed.power.caps import CapEnforcer
from testbed.substrate.base import Substrate
from testbed.substrate.emulated.base import EmulatedSubstrate


class _Owner(OpenClose):
    def __init__(self, fail: BaseException | None = None):
        self.fail, self.calls = fail, []

    def open(self):
        self.calls.append("open")
        if self.fail is not None:
            raise self.fail

    def close(self):
        self.calls.append("close")


def test_enter_opens_and_exit_closes():
    owner = _Owner()
    with owner as got:
        assert got is owner and owner.calls == ["open"]
    assert owner.calls == ["open", "close"]


def test_exit_closes_when_the_block_raises():
    owner = _Owner()
    with pytest.raises(ValueError), owner:
        raise ValueError("in the block")
    assert owner.calls == ["open", "close"]


@pytest.mark.parametrize("fail", [RuntimeError("half up"), KeyboardInterrupt()])
def test_a_failed_open_is_closed_and_its_exception_goes_on(fail):
    owner = _Owner(fail)
    with pytest.raises(type(fail)):
        with owner:
            pytest.fail("the block must not run")
    assert owner.calls == ["open", "close"]


def test_the_defaults_do_nothing():
    with OpenClose() as plain:
        assert isinstance(plain, OpenClose)


def test_every_owner_of_live_resources_uses_it():
    for cls in (Substrate, EmulatedSubstrate, Exchange, NetnsExchange, CapEnforcer):
        assert issubclass(cls, OpenClose)
        assert cls.__enter__ is OpenClose.__enter__, cls
