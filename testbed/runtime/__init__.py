"""Container runtime for node agents: a private Docker engine per run (``dockerd.py``), a base
image built without a registry (``image.py``), and containers whose processes live in a site's
network namespace (``container.py``). Names are imported lazily, so ``python -m
testbed.runtime.image`` runs cleanly."""

from __future__ import annotations

import importlib

_WHERE = {
    "ContainerNode": "container", "Mount": "container", "host_python": "container", "host_python_mounts": "container",
    "DockerEngine": "dockerd",
    "DockerCommandError": "errors", "RuntimeUnavailable": "errors",
    "BaseImage": "image", "BaseImageRecipe": "image", "ensure_base_image": "image",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"testbed.runtime.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
