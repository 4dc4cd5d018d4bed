"""An httpx client whose requests in flight can be aborted from another thread.

Closing an ``httpx.Client`` does not wake a thread blocked reading a reply: it waits until the server answers
(a long generation, a hung server). ``AbortableHTTP`` knows every socket its connections hold, so ``abort()``
shuts them down: each blocked read returns at once with a transport error, and the server sees the client go
(llama.cpp then drops the generation). Used by ``OpenAICompatClient.close`` so that stopping a run never waits
for a generation nobody needs any more.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpcore
import httpx


class _TrackedStream(httpcore.NetworkStream):
    """A network stream that registers itself while open, so its socket can be shut down from outside."""

    def __init__(self, inner: httpcore.NetworkStream, registry: "_TrackingBackend") -> None:
        self._inner = inner
        self._registry = registry

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._registry.forget(self)
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> httpcore.NetworkStream:
        self._inner = self._inner.start_tls(ssl_context, server_hostname, timeout)  # the TLS socket replaces the plain one
        return self

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def shut_down(self) -> None:
        sock = self._inner.get_extra_info("socket")
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by its own thread


class _TrackingBackend(httpcore.SyncBackend):
    """httpcore's socket backend, keeping the streams it opened until they close."""

    def __init__(self) -> None:
        self._streams: set[_TrackedStream] = set()
        self._lock = threading.Lock()

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        stream = _TrackedStream(super().connect_tcp(*args, **kwargs), self)
        with self._lock:
            self._streams.add(stream)
        return stream

    def forget(self, stream: _TrackedStream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def shut_down_all(self) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.shut_down()


class AbortableHTTP(httpx.Client):
    """``httpx.Client`` plus ``abort()``: every request in flight fails at once with a transport error."""

    def __init__(self, **kwargs: Any) -> None:
        self._backend = _TrackingBackend()
        transport = httpx.HTTPTransport(trust_env=bool(kwargs.get("trust_env", True)))
        pool = getattr(transport, "_pool", None)
        if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
            raise RuntimeError(f"httpx {httpx.__version__} / httpcore {httpcore.__version__}: cannot reach the connection pool's "
                               "network backend (core/llm/abortable.py was written for httpx 0.27-0.29 on httpcore 1.0): install those")
        pool._network_backend = self._backend  # httpx offers no public way to pass httpcore a backend
        super().__init__(transport=transport, **kwargs)

    def abort(self) -> None:
        self._backend.shut_down_all()
