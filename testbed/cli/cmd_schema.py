"""``testbed schema``: the scenario JSON Schema (point your editor's YAML plugin at it)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the scenario JSON Schema")
    p.add_argument("--topology", action="store_true", help="the topology-file schema instead")
    p.set_defaults(func=_schema)


def json_schema(topology: bool = False) -> dict:
    """The JSON Schema of scenario files (or of topology files): what ``testbed schema`` prints and
    what the documentation's generated field reference is made from."""
    from testbed.spec.scenario import Scenario
    from testbed.spec.topology import Topology

    model = Topology if topology else Scenario
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(args.topology), indent=2, sort_keys=True))
    return 0
