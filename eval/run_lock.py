"""One process per run folder: an exclusive file lock, with a sidecar naming who holds it.

Two identical commands at once would both append rows and pay for every LLM call twice. The lock
(``filelock``: an OS lock, released by the kernel when the holder dies, so a kill -9 leaves no stale
lock) is taken before the folder is read; the loser fails at once with the holder's pid, host and
start time, read from ``.lock.json`` beside the lock file.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from filelock import FileLock, Timeout

from core.api import HarnessError

LOCK_NAME = ".lock"
SIDECAR_NAME = ".lock.json"


class RunLockedError(HarnessError):
    """Another process is running this configuration."""


class RunFolderError(HarnessError):
    """The run folder (or its lock file) cannot be created: results_dir is read-only or not a folder."""


class RunLock:
    """``with RunLock(run_dir): ...``; raises RunLockedError if another process holds it."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.sidecar = run_dir / SIDECAR_NAME
        self._lock = FileLock(str(run_dir / LOCK_NAME), timeout=0)

    def __enter__(self) -> "RunLock":
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except Timeout:
            raise RunLockedError(
                f"{self.run_dir} is in use by {self._holder()}: wait for it to finish (or stop that process); "
                "the same command afterwards resumes or reads its result"
            ) from None
        except OSError as err:
            raise RunFolderError(
                f"cannot create the run folder {self.run_dir} ({err.strerror or err}): make results_dir writable or point "
                "results_dir=... at a writable folder"
            ) from err
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": datetime.now(timezone.utc).isoformat(),
                  "command": " ".join(sys.argv)}  # fmt: skip
        self.sidecar.write_text(json.dumps(holder, indent=2))
        return self

    def _holder(self) -> str:
        try:
            info = json.loads(self.sidecar.read_text())
            return f"pid {info['pid']} on {info['host']} (since {info['started_at']}: {info.get('command', '')})"
        except (OSError, ValueError, KeyError):
            return f"another process (no readable {self.sidecar.name})"

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.sidecar.unlink(missing_ok=True)
        self._lock.release()
