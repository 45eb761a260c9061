"""One controller for every substrate: placement, migration decisions, accounting, recording."""
