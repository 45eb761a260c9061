"""'Did you mean ...?' for a mistyped name: commands, flags, choices, scenario fields, policies."""

from __future__ import annotations

import difflib
from typing import Iterable


def suggest(word: str, known: Iterable[str]) -> list[str]:
    """Known words ``word`` is probably a typo or a prefix of: prefix matches first, then close ones."""
    known = sorted({str(k) for k in known})
    prefix = [k for k in known if len(word) >= 2 and k.startswith(word) and k != word]
    close = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    out: list[str] = []
    for k in prefix + close:
        if k not in out:
            out.append(k)
    return out[:3]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean a or b?)``, or ``""`` when nothing is close."""
    hits = suggest(word, known)
    return f" (did you mean {' or '.join(hits)}?)" if hits else ""
