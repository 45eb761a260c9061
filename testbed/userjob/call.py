"""``python -m testbed.userjob.call module:function``: run a user's Python callable under the
contract (:mod:`testbed.userjob.contract`): ``function(ctx)`` with a :class:`JobContext` built from
the environment, SIGTERM setting ``ctx.stop_requested``."""

from __future__ import annotations

import importlib
import sys

from testbed.userjob.contract import JobContext


def main(argv: list[str]) -> int:
    if len(argv) != 1 or ":" not in argv[0]:
        print("usage: python -m testbed.userjob.call module:function", file=sys.stderr)
        return 2
    mod, _, name = argv[0].rpartition(":")
    ctx = JobContext.from_env()
    sys.path.insert(0, ".")  # the program's working directory (the scenario's folder by default)
    fn = getattr(importlib.import_module(mod), name)
    fn(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
