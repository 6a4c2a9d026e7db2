"""HTTP for the embeddings endpoint under one deadline: from resolving its name to the reply's last byte.

``urllib``'s own timeout bounds each socket operation, not a request: a server that trickles a byte at a time, or a
resolver that hangs, would hold a prepare for far longer than its timeout. Here every step (name resolution in a
bounded pool of threads, connect, TLS, each send and receive) gets what is left of one deadline, and redirects are
refused (an endpoint is configured, never discovered).
"""

from __future__ import annotations

import concurrent.futures
import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect fails the request (an ``HTTPError``): the endpoint is what the operator configured."""

    def redirect_request(self, *args, **kwargs):
        return None  # a redirect is an answer we refuse (the key would follow it elsewhere)


def _time_left(deadline: float) -> float:
    """Seconds left until ``deadline`` (``time.monotonic()``); none left is a timeout."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the embeddings endpoint took longer than the timeout")
    return left


class _DeadlineSocket:
    """Mixed into a socket: every wait on it ends by ``deadline`` (``time.monotonic()``), not one timeout per wait.

    A socket's own timeout bounds each wait apart: a server sending one byte just inside it, in the status line, a
    header or a chunk's size line, would hold the exchange open as long as it likes. So before each receive or send
    the timeout is set to what is left of the exchange's.
    """

    deadline: float | None = None  # None (a socket not yet given one): the socket's own timeout alone

    if TYPE_CHECKING:  # the socket's, which this is mixed into (defined here, it would hide the socket's)

        def settimeout(self, value: float | None, /) -> None: ...

    def _bounded(self) -> None:
        if self.deadline is not None:
            self.settimeout(_time_left(self.deadline))

    # What http.client's exchange goes through: its reader receives into buffers, its writes send all (an SSL
    # socket's by sends); the status line, the headers, a chunk's size line and the body alike.
    def recv_into(self, *args, **kwargs):
        self._bounded()
        return super().recv_into(*args, **kwargs)

    def send(self, *args, **kwargs):
        self._bounded()
        return super().send(*args, **kwargs)

    def sendall(self, *args, **kwargs):
        self._bounded()
        return super().sendall(*args, **kwargs)


class _DeadlinePlainSocket(_DeadlineSocket, socket.socket):
    pass


class _DeadlineSSLSocket(_DeadlineSocket, ssl.SSLSocket):
    pass


_RESOLVING = threading.BoundedSemaphore(2)
"""Lookups of the endpoint's name in flight, each on a thread of its own: the system resolver has its own timeouts
and retries (seconds each), and ``getaddrinfo`` cannot be interrupted, so the caller waits for the answer only until
its deadline. At most two: a resolver that hangs holds them, and every later lookup waits for one until its
caller's deadline, then gives up without starting (nothing piles up). Daemon threads: a lookup that hangs never
keeps the process from exiting (a worker's shutdown would otherwise wait for the resolver to give up)."""
_RESOLVING_TOO_LONG = "resolving the embeddings endpoint's name took longer than the timeout"


def _addresses(host: str, port: int, deadline: float) -> list[tuple]:
    """``getaddrinfo(host, port)`` for a TCP connection, or TimeoutError once ``deadline`` passes."""
    if not _RESOLVING.acquire(timeout=_time_left(deadline)):
        raise TimeoutError(_RESOLVING_TOO_LONG)
    lookup: concurrent.futures.Future[list[tuple]] = concurrent.futures.Future()

    def resolve() -> None:
        try:
            lookup.set_result(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except Exception as exc:
            lookup.set_exception(exc)
        finally:
            _RESOLVING.release()

    try:
        threading.Thread(target=resolve, name="embeddings-resolver", daemon=True).start()
    except BaseException:
        _RESOLVING.release()  # no thread: the lookup's place is free again
        raise
    try:
        return lookup.result(timeout=_time_left(deadline))
    except concurrent.futures.TimeoutError:
        raise TimeoutError(_RESOLVING_TOO_LONG) from None


class _DeadlineConnection(http.client.HTTPConnection):
    """An HTTP connection whose ``timeout`` bounds the whole exchange, from the name's resolution to the reply's last
    byte (the response reads through the same socket)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        timeout = self.timeout
        real = isinstance(timeout, int | float) and not isinstance(timeout, bool)
        self.deadline = time.monotonic() + timeout if real and timeout is not None else None
        # http.client makes its sockets through this attribute (a proxy's CONNECT included): ours bound every wait.
        self._create_connection = self._deadline_socket

    def _deadline_socket(self, address, timeout, source_address=None) -> socket.socket:
        if self.deadline is None:
            plain = socket.create_connection(address, timeout, source_address)
        else:
            plain = self._connected(address, source_address, self.deadline)
        sock = _DeadlinePlainSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
        sock.deadline = self.deadline
        sock._bounded()  # a TLS handshake waits in C with the socket's timeout as one total: what is left
        return sock

    def _connected(self, address, source_address, deadline: float) -> socket.socket:
        """A connection to the first address the name resolves to that accepts one, each tried for at most what is
        left of the deadline (as ``socket.create_connection`` tries them, but resolved within the deadline too)."""
        host, port = address
        failures: list[OSError] = []
        for family, kind, protocol, _name, resolved in _addresses(host, port, deadline):
            # The resolved address whole (an IPv6 link-local one keeps its scope id), no second lookup.
            sock = socket.socket(family, kind, protocol)
            try:
                sock.settimeout(_time_left(deadline))
                if source_address:
                    sock.bind(source_address)
                sock.connect(resolved)
                return sock
            except TimeoutError:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                failures.append(exc)
        raise failures[0] if failures else OSError(f"{host} resolves to no address")


class _DeadlineHTTPSConnection(_DeadlineConnection, http.client.HTTPSConnection):
    def connect(self) -> None:
        super().connect()  # the handshake's socket is made by the context's ``sslsocket_class``: ours
        if isinstance(self.sock, _DeadlineSocket):
            self.sock.deadline = self.deadline


class DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """``http://`` requests whose ``timeout`` bounds the whole exchange (``_DeadlineConnection``)."""

    def http_open(self, req):
        return self.do_open(_DeadlineConnection, req)


class DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    """``https://`` requests likewise, the TLS handshake and every read and write included."""

    def __init__(self) -> None:
        # The default verification, with SSL sockets that keep to the deadline (see ``_DeadlineSocket``).
        self.deadline_context = ssl.create_default_context()
        self.deadline_context.set_alpn_protocols(["http/1.1"])
        self.deadline_context.sslsocket_class = _DeadlineSSLSocket
        super().__init__(context=self.deadline_context)

    def https_open(self, req):
        return self.do_open(_DeadlineHTTPSConnection, req, context=self.deadline_context)
