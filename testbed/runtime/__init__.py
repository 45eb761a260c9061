"""Container runtime for node agents: a private Docker engine per run (``dockerd.py``), a base
image built without a registry (``image.py``), and containers whose processes live in a site's
network namespace (``container.py``)."""

from testbed.runtime.container import ContainerNode, Mount, host_python, host_python_mounts
from testbed.runtime.dockerd import DockerEngine
from testbed.runtime.errors import DockerCommandError, RuntimeUnavailable
from testbed.runtime.image import BaseImage, BaseImageRecipe, ensure_base_image

__all__ = ["BaseImage", "BaseImageRecipe", "ContainerNode", "DockerCommandError", "DockerEngine", "Mount",
           "RuntimeUnavailable", "ensure_base_image", "host_python", "host_python_mounts"]
