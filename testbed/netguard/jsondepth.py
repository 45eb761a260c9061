"""Bounding JSON nesting before decoding: a flat scan, no recursion (a peer's ``[[[[...`` cannot
exhaust the decoder's stack or the time it takes)."""

from __future__ import annotations

import re

MAX_JSON_DEPTH = 32

_SPECIAL = re.compile(rb'["\\\[\]{}]')


def json_depth_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text ``data`` nests arrays/objects deeper than ``limit``: a flat scan of its
    brackets outside strings (no recursion, linear in the number of special characters; stops at
    the first level over the limit). Does not validate the JSON."""
    depth, in_str, skip = 0, False, -1
    for m in _SPECIAL.finditer(data):
        i = m.start()
        if i == skip:
            continue
        c = data[i]
        if in_str:
            if c == 0x5C:  # backslash: the next byte is escaped
                skip = i + 1
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif c in (0x5D, 0x7D):
            depth -= 1
    return False
