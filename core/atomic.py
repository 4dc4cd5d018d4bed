"""Files that are never half written: whoever reads one (a resumed run, a table script, a restored
memory) sees the old content or the new, never a mix, even after a crash or a kill -9.

A write goes to a temporary file in the same folder, is flushed and fsynced, then renamed over the
target (rename is atomic on one filesystem) and the folder is fsynced so the rename itself survives a
power cut. The temporary file is removed when anything fails. Every layer (core, eval, mosaic,
baselines) writes its state and results through these three functions.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (its folder is created when missing)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


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
