"""Your own workload on the nodes: a user command or Python callable that trains, checkpoints to a
path and resumes from one, run by the node agents under a tiny contract (docs/workloads.md):
:mod:`.contract` (what the program sees), :mod:`.spec` (how a scenario names it),
:mod:`.runner` (how an agent runs it; the agent's commands for it are testbed.agent.userjob_ops)."""
