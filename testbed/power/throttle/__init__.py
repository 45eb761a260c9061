"""CPU throttles that hold real training to the throughput a GPU cap would allow: the closed-loop
rate control, CPU quotas in cgroups, and the agents' cap enforcer (``power.backend: emulated-throttle``)."""
