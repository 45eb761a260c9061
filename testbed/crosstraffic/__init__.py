"""Cross-traffic on the WAN (issue #33): the analytic model (:mod:`.model`), the generator that
runs inside the emulation's namespaces (:mod:`.gen`), its owner on a live fabric (:mod:`.live`)
and the bandwidth the feasibility predictor assumes under it (:mod:`.predict`)."""
