"""Cross-checks of a scenario's ``federated:`` block against its sites, links and policies."""

from __future__ import annotations

from testbed.spec.federated import SELECTION_POLICY_SPECS


def federated_problems(sc) -> list[tuple[str, str]]:
    """(field path, message) per problem; empty when fine. Migration scenarios may not use
    selection policies, federated ones may only use them."""
    problems: list[tuple[str, str]] = []
    fl = sc.federated
    if fl is None:
        for i, p in enumerate(sc.policies):
            if p.name in SELECTION_POLICY_SPECS:
                problems.append((f"policies[{i}]", f"{p.name!r} selects federated sites: it needs a 'federated:' block"))
        return problems
    for i, p in enumerate(sc.policies):
        if p.name not in SELECTION_POLICY_SPECS:
            problems.append((f"policies[{i}]", f"{p.name!r} is a migration policy; a federated scenario takes "
                                               f"{', '.join(SELECTION_POLICY_SPECS.names())}"))
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
        if p.name in SELECTION_POLICY_SPECS:
            problems += p.site_problems(f"policies[{i}]", parts, names)
    return problems


def participants(sc) -> list[str]:
    """Sites that hold data: as listed, else every site but the aggregator (in site order)."""
    fl = sc.federated
    if fl.participants is not None:
        return list(fl.participants)
    return [s.name for s in sc.sites if s.name != fl.aggregator]
