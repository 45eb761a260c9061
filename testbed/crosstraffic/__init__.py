"""Cross-traffic on the WAN (issue #33): the analytic model (:mod:`.model`), the bandwidth the
feasibility predictor assumes under it (:mod:`.predict`). The validation sweep over load x predictor is
sweeps/validate-cross-traffic.yaml (and -emulated), judged by :mod:`testbed.analysis.cross_traffic_report`.
The scenario field is :mod:`testbed.spec.cross_traffic`; the generator that runs inside the
emulation's namespaces and its owner on a live fabric are :mod:`testbed.netem.xtgen` and
:mod:`testbed.netem.crosstraffic`."""
