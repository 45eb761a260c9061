"""The built-in power backends: importing this module registers them (one line per backend). The
scenario model imports it (testbed.spec.scenario), so ``power.backend`` always knows them."""

from testbed.power import model_caps  # noqa: F401  (model, the default where nothing trains)
from testbed.power.throttle import agent_throttle  # noqa: F401  (emulated-throttle, the default where agents train)
from testbed.power import site_caps  # noqa: F401  (nvml)
