"""Resumable row files: append-only JSONL, one row per unit of paid work (a prediction, a judgement).

Every benchmark stores its rows through ``JsonlRows`` (via ``RunContext.rows``), so what a damaged
file does is decided here, once:

* a line that is not valid JSON, or has no key, is skipped and reported with its line number;
  every other good row is kept (a bad line in the middle never costs the rows after it);
* a torn last line (no newline: a killed write) is cut off, so the next append starts cleanly;
* each row is stamped with the hash of the input files it was computed from (``input_hash``); a row
  stamped with another hash is skipped and reported, so rows from two versions of a dataset never mix.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)

# The field every row carries: the run's input-file hash (eval.provenance.input_hashes).
INPUT_HASH_FIELD = "input_hash"


class JsonlRows:
    """Append-only JSONL file of rows with a unique ``key`` field; damaged lines are skipped, not fatal."""

    def __init__(self, path: Path, key_field: str = "key", input_hash: str | None = None) -> None:
        self.path = path
        self.key_field = key_field
        self.input_hash = input_hash  # None: rows are neither stamped nor checked (unit tests, ad-hoc use)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._rows: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.skipped: list[tuple[int, str]] = []  # (line number, why) of every line not loaded
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        size = self.path.stat().st_size
        with self.path.open("rb") as handle:
            data = handle.read()
        lines = data.split(b"\n")
        torn = lines.pop()  # b"" when the file ends with a newline; else an unfinished last line
        for number, raw in enumerate(lines, start=1):
            why = self._take(raw)
            if why:
                self.skipped.append((number, why))
                log.warning("%s line %d: %s; skipped (the other rows are kept; the item is redone if needed)", self.path, number, why)
        if torn:
            number = len(lines) + 1
            self.skipped.append((number, "torn last line (a killed write)"))
            log.warning("%s line %d: torn last line left by a killed run; cut off and redone", self.path, number)
            with self.path.open("r+b") as handle:
                handle.truncate(size - len(torn))

    def _take(self, raw: bytes) -> str | None:
        """Load one line; return why it was skipped, or None."""
        if not raw.strip():
            return "empty line"
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            return f"not valid JSON ({err})"
        if not isinstance(row, dict) or self.key_field not in row:
            return f"no `{self.key_field}` field"
        if self.input_hash is not None and row.get(INPUT_HASH_FIELD) != self.input_hash:
            return f"computed from other input files ({INPUT_HASH_FIELD} {row.get(INPUT_HASH_FIELD)!r}, this run {self.input_hash!r})"
        self._rows.setdefault(str(row[self.key_field]), row)
        return None

    def __contains__(self, key: object) -> bool:
        return str(key) in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._rows.get(str(key))

    def append(self, row: dict[str, Any]) -> None:
        key = str(row[self.key_field])
        if self.input_hash is not None:
            row = {**row, INPUT_HASH_FIELD: self.input_hash}
        with self._lock:
            if key in self._rows:
                return
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            self._rows[key] = row

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:  # run.workers > 1: a reader never sees the dict mid-append
            return list(self._rows.values())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a JSONL file written by a run, read only (the file is never touched, so a published or
    still-running run can be read): a line that is not JSON, such as the torn last line of a killed write,
    is skipped and logged with its number. For the read-only reports (compare, ingest cost, tool calls)."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s line %d: not JSON (a torn last line of a killed run?); skipped", path, number)
    return rows
