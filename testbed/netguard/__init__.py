"""Defences shared by every server that listens where hostile peers can reach it (the agent's
control server, the transfer server): authenticate first, hold unauthenticated peers cheaply and
boundedly, and never let the accept loop die.

- :mod:`~testbed.netguard.challenge` -- the HMAC challenge/response handshake (the token never
  crosses the network; nothing a peer sends is parsed before it is answered correctly);
- :mod:`~testbed.netguard.gate` -- ``Gate``: the accept loop with a cap of unauthenticated
  connections (fair per-address eviction), their auth timeout, and survival of EMFILE/ENFILE;
- :mod:`~testbed.netguard.jsondepth` -- a flat scan bounding JSON nesting before decoding;
- :mod:`~testbed.netguard.fdlimit` -- raising the open-file soft limit of a server process.

Import direction: servers import this package; it imports nothing from them.
"""

from testbed.netguard.challenge import MAC_BYTES, NONCE_BYTES, Challenge
from testbed.netguard.fdlimit import raise_fd_limit
from testbed.netguard.gate import Gate
from testbed.netguard.jsondepth import json_depth_exceeds

__all__ = ["MAC_BYTES", "NONCE_BYTES", "Challenge", "Gate", "json_depth_exceeds", "raise_fd_limit"]
