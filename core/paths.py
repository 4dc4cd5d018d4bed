"""File names derived from harness identifiers, shared by every system that keeps files per namespace."""

from __future__ import annotations

import re


def file_safe_name(namespace: str) -> str:
    """A namespace as one file or folder name (speaker names carry spaces, ids may carry slashes)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", namespace) or "default"
