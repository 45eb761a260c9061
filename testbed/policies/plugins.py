"""Policies named by class (``class: "module:Class"``): resolved by the scenario loader,
:mod:`testbed.spec.plugins`; its public names are kept here for plug-in authors."""

from testbed.spec.plugins import ENTRY_POINT_GROUP, PolicyParams, entry_point_names, resolve_class_entries

__all__ = ["ENTRY_POINT_GROUP", "PolicyParams", "entry_point_names", "resolve_class_entries"]
