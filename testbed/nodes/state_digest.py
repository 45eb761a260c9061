"""A SHA-256 over a checkpoint's *content* (nested dicts, lists, tensors, scalars).

``torch.save`` does not protect tensor bytes: a flipped bit inside a weight loads without complaint
(the zip records carry no checksum that ``torch.load`` verifies). So the checkpoint stores this
digest next to the state, and loading recomputes it. It covers types, dict order, tensor dtypes,
shapes and bytes, and the exact ``repr`` of floats, so two states have the same digest iff they are
bit-identical.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch


def state_sha256(obj: Any) -> str:
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def _feed(h: Any, obj: Any) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}:".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}:".encode())
        for k, v in obj.items():
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{'L' if isinstance(obj, list) else 'U'}{len(obj)}:".encode())
        for v in obj:
            _feed(h, v)
    elif obj is None or isinstance(obj, (bool, int, float, str)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    else:
        raise TypeError(f"cannot digest a {type(obj).__name__} (a checkpoint holds only tensors and plain values)")
