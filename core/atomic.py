"""Files that are never half written: whoever reads one (a resumed run, a table script, a restored
memory) sees the old content or the new, never a mix, even after a crash or a kill -9.

A write goes to a temporary file in the same folder, is flushed and fsynced, then renamed over the
target (rename is atomic on one filesystem) and the folder is fsynced so the rename itself survives a
power cut. The temporary file is removed when anything fails. Every layer (core, eval, mosaic,
baselines) writes its state and results through these three functions.

A full disk (ENOSPC, or a quota: EDQUOT) is reported as ``DiskFullError`` naming the file that could not
be written and the fix, which run.py prints as one line; the target keeps its previous content.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from core.api import HarnessError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(HarnessError, OSError):
    """No space left (or quota reached) while writing a file; the message names it and says to free space."""

    def __str__(self) -> str:
        return str(self.strerror)


def disk_full(path: str | Path) -> DiskFullError:
    """The one-line error for a file that could not be written because its disk is full."""
    return DiskFullError(errno.ENOSPC, f"could not write {path}: no space left on its disk; free space there "
                         "(or point results_dir / cache_dir at another disk) and rerun the same command (a run resumes where it stopped)")

# mkstemp creates its file 0600; a result written through it would be unreadable to the other users of a shared
# GPU box. The process umask is read once here (os.umask can only be read by setting it, which is not
# thread-safe later) and a new file gets the mode open() would have given it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (its folder is created when missing)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        if err.errno in NO_SPACE:
            raise disk_full(target) from err
        raise
    try:
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException as err:
        Path(tmp_name).unlink(missing_ok=True)
        if isinstance(err, OSError) and not isinstance(err, DiskFullError) and err.errno in NO_SPACE:
            raise disk_full(target) from err
        raise
    _fsync_dir(target.parent)


def _mode_for(target: Path) -> int:
    """The replaced file's permissions when there is one, else what a plain open() would give under the umask."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o666 & ~_UMASK


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, payload: Any, **dumps: Any) -> None:
    """``json.dumps(payload, **dumps)`` written atomically (the caller keeps its own format: indent, default=str)."""
    write_text_atomic(path, json.dumps(payload, **dumps))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not allow opening a folder; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
