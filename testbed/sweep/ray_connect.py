"""Join a running Ray cluster (``--ray ADDRESS``) the way Ray's own CLI does, and fail in seconds
with one line that says what to do when the address or the token is wrong.

Token authentication: ``ray start --head`` turns Ray's token auth on when a token exists on the
machine (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``, which Ray writes
the first time ``ray.init()`` starts a local instance or ``ray get-auth-token --generate`` runs),
and ``ray.init(address="auto")`` turns it on for the client in the same case. An explicit
``host:port`` does not, and a driver without the token is refused ("Authentication token is
missing or incorrect") after minutes of retries. Here every address is joined like ``auto``:
when ``RAY_AUTH_MODE`` is unset and a token is found, this process sends it (a cluster without
auth ignores it). ``RAY_AUTH_MODE`` is put back as it was afterwards.

Before ``ray.init`` the address is checked: one TCP connect (``TCP_PROBE_S``) and, for a GCS
address, one request to the GCS with Ray's connect timeout lowered to ``GCS_PROBE_S``. So an
address where nothing listens, a port that is not Ray's, and a missing or rejected token each end
the sweep in well under 30 s (Ray itself retries for minutes).
"""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from testbed.errors import SpecError, TestbedError

TCP_PROBE_S = 5.0
GCS_PROBE_S = 5          # Ray's py_gcs_connect_timeout_s while probing (a probe then takes about 3x this)
AUTH_MODE = "RAY_AUTH_MODE"
TOKEN_HELP = ("put the head node's token (`ray get-auth-token` prints it there) in ~/.ray/auth_token on this "
              "machine, or in RAY_AUTH_TOKEN, or in a file named by RAY_AUTH_TOKEN_PATH")


class RayConnectError(TestbedError):
    """The cluster at ``--ray ADDRESS`` cannot be joined (nothing there, not Ray, token missing or wrong)."""


@dataclass(frozen=True)
class RayAddress:
    given: str        # as the user wrote it
    host: str
    port: int
    client: bool      # ray://host:port (Ray Client) rather than a GCS address

    @property
    def join(self) -> str:
        """What to pass to ray.init."""
        host = f"[{self.host}]" if ":" in self.host else self.host   # an IPv6 address
        return f"ray://{host}:{self.port}" if self.client else f"{host}:{self.port}"


def parse_address(address: str) -> RayAddress:
    """``host:port`` or ``ray://host:port``; ``auto`` is the cluster ``ray start`` last started on
    this machine (or ``RAY_ADDRESS``), found as Ray finds it."""
    given = address
    if address == "auto":
        address = _auto_address()
    client = address.startswith("ray://")
    rest = address[len("ray://"):] if client else address
    host, sep, port_text = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise SpecError([("--ray", f"expected 'local', 'auto', HOST:PORT or ray://HOST:PORT (got {given!r})")])
    return RayAddress(given=given, host=host, port=int(port_text), client=client)


def _auto_address() -> str:
    from ray._private import services

    try:
        found = services.canonicalize_bootstrap_address("auto")
    except (ConnectionError, ValueError) as e:
        raise RayConnectError("--ray auto: no running Ray cluster found on this machine; start one with "
                              f"`ray start --head`, or give its address ({_first_line(e)})") from e
    if not found:
        raise RayConnectError("--ray auto: no running Ray cluster found on this machine; start one with `ray start --head`")
    return found


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def token_source() -> str | None:
    """Where Ray would read this machine's token from, or None when there is none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return f"RAY_AUTH_TOKEN_PATH={path}" if os.path.isfile(path) else None
    default = os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    return default if os.path.isfile(default) else None


@contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` in this process (None: unchanged) and Ray's config re-read, both undone after."""
    if value is None:
        yield
        return
    from ray._raylet import Config

    old = os.environ.get(name)
    os.environ[name] = value
    Config.initialize("")  # Ray reads RAY_* settings when its config is initialised (as its CLI does)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
        Config.initialize("")


def _auth_mode() -> str | None:
    """RAY_AUTH_MODE for this client: the user's setting, else 'token' when a token is found (as
    ``ray start --head`` and ``ray.init('auto')`` decide), else None (Ray's default)."""
    if os.environ.get(AUTH_MODE) is not None:
        return None
    return "token" if token_source() else None


@contextmanager
def joined_auth(addr: RayAddress) -> Iterator[None]:
    """Check ``addr`` and keep this process's token setting right while the sweep is on the cluster."""
    _probe_tcp(addr)
    _forget_cached_token()
    with _env(AUTH_MODE, _auth_mode()):
        if not addr.client:
            with _env("RAY_py_gcs_connect_timeout_s",
                      None if os.environ.get("RAY_py_gcs_connect_timeout_s") else str(GCS_PROBE_S)):
                _probe_gcs(addr)
        yield


def _forget_cached_token() -> None:
    """Ray caches the token it read in this process; read it afresh, as a new ``ray`` command would."""
    try:
        from ray._raylet import AuthenticationTokenLoader
    except ImportError:  # a Ray without token authentication
        return
    AuthenticationTokenLoader.instance().reset_cache()


def _probe_tcp(addr: RayAddress) -> None:
    try:
        with socket.create_connection((addr.host, addr.port), timeout=TCP_PROBE_S):
            pass
    except OSError as e:
        why = f"no answer in {TCP_PROBE_S:.0f} s" if isinstance(e, socket.timeout) else (e.strerror or type(e).__name__)
        hint = ("start the head with `ray start --head` (it prints the address to give), or check the host and port"
                if not addr.client else "start Ray Client on the head (`ray start --head` listens on ray://HOST:10001)")
        raise RayConnectError(f"--ray {addr.given}: nothing answers at {addr.host}:{addr.port} ({why}); {hint}") from e


def _probe_gcs(addr: RayAddress) -> None:
    """One request to the GCS: is it Ray, and does it accept this process's token (if any)?"""
    from ray import exceptions
    from ray._raylet import GcsClient

    where = f"--ray {addr.given}"
    try:
        with _stderr_dropped():  # Ray's C++ client logs each failed attempt; the error below says it in one line
            GcsClient(address=addr.join).cluster_id
    except exceptions.AuthenticationError as e:
        mode, source = os.environ.get(AUTH_MODE), token_source()
        if mode is not None and mode.lower() != "token":
            raise RayConnectError(f"{where}: the cluster needs Ray's auth token but RAY_AUTH_MODE={mode}: "
                                  f"unset it (or set RAY_AUTH_MODE=token) and {TOKEN_HELP}") from e
        if source is None:
            raise RayConnectError(f"{where}: the cluster needs Ray's auth token and this machine has none: {TOKEN_HELP}") from e
        raise RayConnectError(f"{where}: the cluster rejected this machine's Ray auth token (from {source}): "
                              f"{TOKEN_HELP}") from e
    except Exception as e:  # noqa: BLE001 - Ray's RpcError and friends: the port answers, but not as a GCS
        raise RayConnectError(f"{where}: {addr.host}:{addr.port} answers but not as a Ray head ({_first_line(e)}); "
                              "give the address `ray start --head` printed (HOST:PORT, port 6379 by default), "
                              "or ray://HOST:10001 for Ray Client") from e


@contextmanager
def _stderr_dropped() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block (what Ray's C++ side writes there never reaches
    Python's logging)."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
