"""One look at a network backend before a run or a probe fans out: is anything listening?

Without it, a dead server costs every trial its retries (``passk probe`` against a closed port
printed 54 s of retry warnings before its one-line error). One TCP connection, a few seconds at
most, says at once what is wrong.

>>> from passk_nb.harness.providers import make_provider
>>> check_backend(make_provider("scripted"))  # not a network backend: nothing to check
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from passk_nb.harness.providers.base import BaseProvider
from passk_nb.harness.providers.http import RemoteProvider

#: The longest the check waits for the backend's host to accept a connection.
CHECK_TIMEOUT_S = 5.0


class BackendUnreachable(ConnectionError):
    """Nothing answers at the backend's address: the run did not start, and nothing was recorded."""


def check_backend(provider: BaseProvider) -> None:
    """Raise :class:`BackendUnreachable` when a network backend's host does not accept a connection."""
    if not isinstance(provider, RemoteProvider) or not provider.base_url:
        return
    parts = urlsplit(provider.base_url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return  # the provider refuses a bad port itself
    timeout = min(CHECK_TIMEOUT_S, float(getattr(provider, "timeout", CHECK_TIMEOUT_S)))
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, TimeoutError | socket.timeout):
            reason = f"no answer within {timeout:g} s"
        raise BackendUnreachable(
            f"cannot reach the {provider.name} backend at {host}:{port} ({reason}); nothing was run. "
            "Is the server running? Check the base URL (base_url=)"
        ) from None
