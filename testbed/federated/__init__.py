"""The PowerTrip study (arXiv 2507.17904): synchronous FedAvg across power-constrained sites, where a
policy chooses which and how many sites join each round.

Modules, one concept each: :mod:`data` (digits, seeded IID / Dirichlet partitions), :mod:`fedavg`
(real PyTorch local training and weighted averaging), :mod:`capacity` (effective capacity =
min(hardware, power budget) through the power path), :mod:`roundtime` (straggler and pooled
clocks), :mod:`score` (power-to-cost ranking), :mod:`projection` (``ProjectAccuracyGain``),
:mod:`view` (what a policy sees), ``policies/`` (one file each), :mod:`controller` (the round
loop), :mod:`exchange` (the round's exchange: modelled or, :mod:`emulated`, real update transfers on
netns). ``testbed run`` drives it as a study (:mod:`testbed.studies.federated`).
"""
