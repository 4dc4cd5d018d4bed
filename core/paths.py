"""File names derived from harness identifiers, shared by every system that keeps files per namespace."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path


def file_safe_name(namespace: str) -> str:
    """A namespace as one file or folder name (speaker names carry spaces, ids may carry slashes)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", namespace) or "default"


def sha256_of(path: str | Path, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file, read in chunks (model parts, data files, run inputs)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
