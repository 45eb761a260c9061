"""How a scenario names a user's program: the model lives with the scenario's (testbed.spec.programs)."""

from testbed.spec.programs import PYTHON, Program, resolve_program_dirs

__all__ = ["PYTHON", "Program", "resolve_program_dirs"]
