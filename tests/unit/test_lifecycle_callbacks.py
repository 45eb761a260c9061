"""A signal that lands in a finaliser or weakref callback is delivered again, not raised there
(Python would print it as "Exception ignored" with a traceback, and lose it)."""

import signal
import sys

import pytest

from testbed import lifecycle


class _Finalised:
    def __del__(self):
        _Finalised.frame = sys._getframe()


def test_a_signal_in_a_finaliser_is_sent_again_not_raised(monkeypatch):
    obj = _Finalised()
    del obj
    sent = []
    monkeypatch.setattr(lifecycle.os, "kill", lambda pid, sig: sent.append(sig))
    monkeypatch.setattr(lifecycle._P, "unwinding", False)
    lifecycle._handler(signal.SIGINT, _Finalised.frame)
    assert sent == [signal.SIGINT] and lifecycle._P.unwinding is False


def test_a_signal_elsewhere_raises(monkeypatch):
    monkeypatch.setattr(lifecycle._P, "unwinding", False)
    monkeypatch.setattr(lifecycle._P, "depth", 0)
    with pytest.raises(KeyboardInterrupt):
        lifecycle._handler(signal.SIGINT, sys._getframe())
