"""A modelled GPU: one that a :class:`PowerProfile` describes, on hosts without one.

Honest about what it is. The cap is a number the profile turns into two consequences:

- **power**: ``power_w()`` is ``profile.draw_w(cap)`` while the device is busy and
  ``profile.idle_w`` while idle; ``energy_j()`` integrates that modelled power over the device's
  clock (piecewise constant between readings and changes). Nothing is measured.
- **speed** (optional, and real): with a :mod:`throttle <testbed.power.throttle.throttle>` attached, setting
  the cap sets the throttle to ``profile.throughput_frac(cap) * reference_cores``, so training
  that runs under the throttle really slows down as the profile says the GPU would.

The enforced cap always equals the request (no other limit exists in a model).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from testbed.power.gpu.device import PowerDevice, PowerLimits, PowerNode
from testbed.power.errors import PowerError
from testbed.power.gpu.profile import PowerProfile
from testbed.power.throttle.throttle import Throttle

Busy = bool | Callable[[], bool]


class ModelledGpu(PowerDevice):
    """One modelled GPU. ``busy``: a flag (change it with :meth:`set_busy`) or a callable.

    With a callable, a change of state is seen at the next reading, so energy is exact only for
    the explicit flag (or when the caller reads at least as often as the state changes).
    """

    def __init__(self, profile: PowerProfile, *, index: int = 0, busy: Busy = True,
                 throttle: Throttle | None = None, reference_cores: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        if not reference_cores > 0:
            raise PowerError(f"reference_cores must be > 0, got {reference_cores!r}")
        self.profile, self.index, self.clock = profile, index, clock
        self.throttle, self.reference_cores = throttle, reference_cores
        self._name = f"emu{index}"
        self._busy = busy
        self._cap_w = profile.default_w
        self._energy_j = 0.0
        self._t_s = clock()
        self._power_w = self._model_power_w()
        self._apply_throttle()

    @property
    def name(self) -> str:
        return self._name

    # -- caps ------------------------------------------------------------------------------------
    def limits_w(self) -> PowerLimits:
        p = self.profile
        return PowerLimits(p.min_w, p.max_w, p.default_w)

    def set_limit_w(self, watts: float) -> None:
        self.limits_w().check(self._name, watts)
        if watts == self._cap_w:
            return  # idempotent: nothing changes, the throttle is not touched
        self._advance()
        self._cap_w = float(watts)
        self._power_w = self._model_power_w()
        self._apply_throttle()

    def enforced_limit_w(self) -> float:
        return self._cap_w

    def throughput_frac(self) -> float:
        """Speed at the current cap relative to uncapped, per the profile."""
        return self.profile.throughput_frac(self._cap_w)

    def _apply_throttle(self) -> None:
        if self.throttle is not None:
            frac = self.throughput_frac()
            self.throttle.set_cores(None if frac >= 1.0 else frac * self.reference_cores)

    # -- power and energy ------------------------------------------------------------------------
    def is_busy(self) -> bool:
        return bool(self._busy() if callable(self._busy) else self._busy)

    def set_busy(self, busy: bool) -> None:
        """Switch between training load and idle (energy up to now is booked at the old power)."""
        if callable(self._busy):
            raise PowerError(f"{self._name}: busy is a callback here; it cannot be set")
        self._advance()
        self._busy = bool(busy)
        self._power_w = self._model_power_w()

    def _model_power_w(self) -> float:
        return self.profile.draw_w(self._cap_w) if self.is_busy() else self.profile.idle_w

    def _advance(self) -> None:
        """Book the energy since the last reading at the power in force since then."""
        now_s = self.clock()
        self._energy_j += max(0.0, now_s - self._t_s) * self._power_w
        self._t_s = max(self._t_s, now_s)

    def power_w(self) -> float:
        self._advance()
        self._power_w = self._model_power_w()
        return self._power_w

    def energy_j(self) -> float:
        self.power_w()
        return self._energy_j


class EmulatedNode(PowerNode):
    """``n_devices`` modelled GPUs of one profile. A context manager: exit puts back default caps.

    ``throttles``: one per device (or none); each device's throttle follows that device's cap.
    """

    def __init__(self, profile: PowerProfile, n_devices: int = 1, *, busy: Busy = True,
                 throttles: Sequence[Throttle | None] = (), reference_cores: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        if n_devices < 1:
            raise PowerError(f"a modelled node needs at least one device, got {n_devices}")
        if throttles and len(throttles) != n_devices:
            raise PowerError(f"{len(throttles)} throttles for {n_devices} devices")
        self.clock = clock
        self._devices = [
            ModelledGpu(profile, index=i, busy=busy, clock=clock, reference_cores=reference_cores,
                           throttle=throttles[i] if throttles else None)
            for i in range(n_devices)]

    @property
    def devices(self) -> Sequence[ModelledGpu]:
        return tuple(self._devices)

    def set_busy(self, busy: bool) -> None:
        for d in self._devices:
            d.set_busy(busy)

    def __enter__(self) -> EmulatedNode:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        for d in self._devices:
            d.set_limit_w(d.profile.default_w)
