"""Concurrent processing of independent units inside one run (``run.workers``).

A GPU server (vLLM) answers dozens of requests at once; sending them one after another leaves
it idle. Benchmarks hand their per-item loops to ``run_stage``: a thread pool of ``ctx.workers``
threads (``run.workers``, read and checked once by the runner; threads, because the work is waiting
on HTTP and on the SQLite cache, both of which release the GIL). Results come back in input order, so nothing downstream depends on N.

Memory systems are not all safe under threads. A system says what it allows with two class
attributes, the capability Protocols ``core.api.ParallelNamespaces`` and ``ParallelSearch`` (absent or
False: serialised):

* ``parallel_namespaces``: different namespaces may be reset/added/searched from different
  threads at once (per-namespace state, nothing shared that a write changes);
* ``parallel_search``: ``search`` is a pure read, so concurrent searches of one namespace are
  safe and their order cannot change any result.

``SystemGuard`` wraps a system's calls in one lock where the system does not allow them. A system with
``parallel_namespaces`` but not ``parallel_search`` has its searches serialised per namespace (one lock per
namespace): a namespace's searches stay in order, and other namespaces' searches go on meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

from core.api import ParallelNamespaces, ParallelSearch

T = TypeVar("T")
R = TypeVar("R")

# ctx.progress(stage, done, total): what a logger (eval.loggers) is told while a stage runs.
ProgressHook = Callable[[str, int, int], None]


_local = threading.local()


def in_worker() -> bool:
    """Whether the calling thread is a ``Stage`` pool thread (other threads may be calling the LLM at once)."""
    return getattr(_local, "worker", False)


class Progress:
    """Items done of one stage, told to ``ctx.progress`` as they finish, from any thread. For work
    finer than a stage's items (the sessions inside one conversation), so a logger sees a long
    ingest move instead of one record at its end."""

    def __init__(self, ctx: Any, name: str, total: int) -> None:
        self.name = name
        self.total = total
        self._hook: ProgressHook | None = getattr(ctx, "progress", None)
        self._lock = threading.Lock()
        self._done = 0

    def tick(self) -> None:
        if self._hook is None:
            return
        with self._lock:  # told in order: done counts never go backwards
            self._done += 1
            self._hook(self.name, self._done, self.total)


class Stage:
    """One stage's thread pool (``workers`` threads) and progress count; ``map`` may be called from
    several threads at once (e.g. each conversation hands its questions to one shared pool)."""

    def __init__(self, ctx: Any, name: str, total: int, workers: int | None = None) -> None:
        self.name = name
        self.total = total
        self.workers = ctx.workers if workers is None else workers  # ctx.workers: run.workers (eval.context.RunContext)
        self._progress = Progress(ctx, name, total)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"mosaic-bench-{name}") if self.workers > 1 else None

    def _one(self, fn: Callable[[T], R], item: T) -> R:
        _local.worker = True
        result = fn(item)
        self._progress.tick()
        return result

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]``, run on the pool; results in input order. The first error is
        re-raised; work not yet started is cancelled and work in flight finishes (its rows are whole)."""
        if self._pool is None:
            out = []
            for item in items:
                out.append(fn(item))
                self._progress.tick()
            return out
        futures = [self._pool.submit(self._one, fn, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def __enter__(self) -> "Stage":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._pool is not None:
            # a stop (SIGTERM, Ctrl-C: not an Exception) does not wait for the work in flight: the runner
            # closes the LLM clients next, which aborts those calls and so ends the threads within seconds
            stopping = exc_type is not None and not issubclass(exc_type, Exception)
            self._pool.shutdown(wait=not stopping, cancel_futures=True)


def run_stage(ctx: Any, name: str, fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """``fn`` over ``items`` with the run's worker count (or ``workers``), telling ``ctx.progress`` each item done."""
    with Stage(ctx, name, len(items), workers) as stage:
        return stage.map(fn, items)


class SystemGuard:
    """Serialise the calls a memory system does not allow from several threads (see module doc)."""

    def __init__(self, system: Any) -> None:
        self.system = system
        self.parallel_namespaces = isinstance(system, ParallelNamespaces) and bool(system.parallel_namespaces)
        self.parallel_search = isinstance(system, ParallelSearch) and bool(system.parallel_search) and self.parallel_namespaces
        self._lock = threading.RLock()
        self._namespace_locks: dict[str, threading.Lock] = {}

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around reset/add/snapshot/restore of one namespace."""
        with nullcontext() if self.parallel_namespaces else self._lock:
            yield

    @contextmanager
    def searching(self, namespace: str | None = None) -> Iterator[None]:
        """Around the searches of ``namespace`` (None: of any namespace, one lock for all)."""
        if self.parallel_search:
            lock: Any = nullcontext()
        elif self.parallel_namespaces and namespace is not None:
            with self._lock:
                lock = self._namespace_locks.setdefault(namespace, threading.Lock())
        else:
            lock = self._lock
        with lock:
            yield

    def namespace_workers(self, requested: int) -> int:
        """How many namespaces may be worked on at once."""
        return requested if self.parallel_namespaces else 1
