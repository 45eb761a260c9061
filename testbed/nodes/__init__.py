"""The training side of node agents: real PyTorch jobs whose checkpoints resume bit for bit.

Modules, one concept each (all but :mod:`~testbed.nodes.errors` import torch, so importing this
package itself does not need torch):

- :mod:`~testbed.nodes.datasets` -- the bundled data (sklearn digits; Zen of Python + stdlib docstrings);
- :mod:`~testbed.nodes.models` -- MLP, small CNN, tiny character transformer;
- :mod:`~testbed.nodes.workloads` -- workloads by name, and a scenario ``family`` -> its stand-in;
- :mod:`~testbed.nodes.determinism` -- process-wide settings for bit-exact training;
- :mod:`~testbed.nodes.rng` -- a job's own RNG state, swapped in around each step;
- :mod:`~testbed.nodes.job` -- ``TrainingJob``: ``step()``, ``evaluate()``, ``state_dict()``;
- :mod:`~testbed.nodes.state_digest` / :mod:`~testbed.nodes.checkpoint` -- ``save`` / ``load``;
- :mod:`~testbed.nodes.throughput` -- steps/s and checkpoint sizes;
- ``python -m testbed.nodes run|families`` -- a job in a process of its own.

The contract: on the same torch version, device type and thread count, a job run N steps straight
and one run k steps, saved, loaded in a fresh process and run N - k more have bit-identical loss
histories, parameters, optimizer state -- and checkpoint files with the same SHA-256.
"""

from testbed.nodes.errors import CheckpointError, NodesError

__all__ = ["CheckpointError", "NodesError"]
