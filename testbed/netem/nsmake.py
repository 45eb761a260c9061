"""Create and remove named network namespaces without forking.

pyroute2's ``netns.create`` forks a helper process to unshare; a Ctrl-C reaches that helper too
(same process group) and can leave a half-made namespace, and the fork runs the parent's Python
signal handlers. Here a short-lived thread unshares its own network namespace and bind-mounts it
as ``/var/run/netns/NAME`` (what ``ip netns add`` does); the thread ends, the namespace stays.
"""

from __future__ import annotations

import ctypes
import os
import threading

CLONE_NEWNET = 0x40000000


def create_netns(name: str) -> None:
    """Create namespace ``name``; raises what went wrong (FileExistsError if it exists)."""
    from pyroute2 import netns

    errors: list[BaseException] = []

    def work() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"unshare: {os.strerror(err)}")
            netns.attach(name, f"self/task/{threading.get_native_id()}")
        except BaseException as e:  # handed to the caller
            errors.append(e)

    th = threading.Thread(target=work, name=f"netns-{name}", daemon=True)
    th.start()
    th.join()
    if errors:
        raise errors[0]


def remove_netns(name: str) -> bool:
    """Remove namespace ``name`` if it exists (also a mount point left by a cut-short create).
    Returns whether there was one."""
    from pyroute2 import netns

    path = f"/var/run/netns/{name}"
    if not os.path.lexists(path):
        return False
    netns.remove(name)
    return True
