"""Cross-checks of a scenario's ``federated:`` block against its sites, links and policies."""

from __future__ import annotations

from testbed.spec.federated import SELECTION_POLICIES
from testbed.spec.policies import policy_label


def federated_problems(sc) -> list[tuple[str, str]]:
    """(field path, message) per problem; empty when fine. Migration scenarios may not use
    selection policies, federated ones may only use them."""
    problems: list[tuple[str, str]] = []
    fl = sc.federated
    if fl is None:
        for i, p in enumerate(sc.policies):
            if p.name in SELECTION_POLICIES:
                problems.append((f"policies[{i}]", f"{p.name!r} selects federated sites: it needs a 'federated:' block"))
        return problems
    for i, p in enumerate(sc.policies):
        if p.name not in SELECTION_POLICIES:
            problems.append((f"policies[{i}]", f"{p.name!r} is a migration policy; a federated scenario takes "
                                               f"{', '.join(SELECTION_POLICIES.names())}"))
    if fl.max_hours > sc.duration_h:
        problems.append(("federated.max_hours", f"must be <= duration_h ({sc.duration_h:g}): traces end there"))
    names = {s.name for s in sc.sites}
    if fl.aggregator not in names:
        problems.append(("federated.aggregator", f"unknown site {fl.aggregator!r}"))
        return problems
    parts = participants(sc)
    for i, name in enumerate(fl.participants or []):
        if name not in names:
            problems.append((f"federated.participants[{i}]", f"unknown site {name!r}"))
        elif name == fl.aggregator:
            problems.append((f"federated.participants[{i}]", "the aggregator does not hold training data"))
    if not parts:
        problems.append(("federated.participants", "no site holds training data"))
    for name in parts:
        if name in names and name != fl.aggregator and sc.link_between(name, fl.aggregator) is None:
            problems.append(("links", f"site {name!r} has no link to the aggregator {fl.aggregator!r}"))
    for i, p in enumerate(sc.policies):  # each selection policy checks its own references (k, k_init, site)
        if p.name in SELECTION_POLICIES:
            problems += p.site_problems(f"policies[{i}]", parts, names)
    labels = output_labels(policy_entries(sc))
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        problems.append(("policies", f"output labels must be unique once every clock of federated.round_time is "
                                     f"run: {dup} appear twice; give those entries a 'label:'"))
    return problems


def policy_entries(sc) -> list:
    """The policy entries a run of ``sc`` runs, each under its own label. A migration scenario's as
    written; a federated one's once per clock: an entry without its own ``round_time`` runs under every
    clock of ``federated.round_time``, the first keeping its label, the others with '-<clock>' appended."""
    fl = sc.federated
    if fl is None:
        return list(sc.policies)
    out = []
    for p in sc.policies:
        if getattr(p, "round_time", None) is not None or p.name not in SELECTION_POLICIES:
            out.append(p)  # its own clock; or a migration policy, refused above
            continue
        for i, clock in enumerate(fl.clocks):
            label = policy_label(p) if i == 0 else f"{policy_label(p)}-{clock}"
            out.append(p.model_copy(update={"round_time": clock, "label": label}))
    return out


def policy_run_count(sc) -> int:
    """How many policy runs a run of ``sc`` makes: each entry under each of its clocks, a static_k
    with a list of k once per k."""
    return sum(len(p.k) if isinstance(getattr(p, "k", None), list) else 1 for p in policy_entries(sc))


def output_labels(entries) -> list[str]:
    """Every output folder the entries write (a static_k with a list of k: one per k, and its best)."""
    labels = []
    for e in entries:
        labels.append(policy_label(e))
        if e.name == "static_k" and isinstance(e.k, list):
            labels += [f"{policy_label(e)}-k{k}" for k in e.k]
    return labels


def participants(sc) -> list[str]:
    """Sites that hold data: as listed, else every site but the aggregator (in site order)."""
    fl = sc.federated
    if fl.participants is not None:
        return list(fl.participants)
    return [s.name for s in sc.sites if s.name != fl.aggregator]
