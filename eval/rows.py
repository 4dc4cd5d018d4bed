"""Resumable row files: append-only JSONL, one row per unit of paid work (a prediction, a judgement).

Every benchmark stores its rows through ``JsonlRows`` (via ``RunContext.rows``), so what a damaged
file does is decided here, once:

* a line that is not valid JSON, or has no key, is skipped and reported with its line number;
  every other good row is kept (a bad line in the middle never costs the rows after it);
* a torn last line (no newline: a killed write) is cut off, so the next append starts cleanly;
* each row is stamped with the hash of the input files it was computed from (``input_hash``); a row
  stamped with another hash is skipped and reported, so rows from two versions of a dataset never mix;
* a row redone on resume (a failed LLM call retried, a judgement of a since-redone prediction) is
  ``replace``d: appended again under its key, and the last line of a key is the one that counts, for
  the runner and for every read-only reader (``read_rows``) alike;
* a row derived from another (a judgement of a prediction) carries ``scored_row_sha256``, the
  ``row_sha256`` of the row it scored, so a redone prediction is never paired with the old verdict.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.atomic import NO_SPACE, disk_full

log = logging.getLogger(__name__)

# The field every row carries: the run's input-file hash (eval.provenance.input_hashes).
INPUT_HASH_FIELD = "input_hash"
# The field a derived row (a judgement) carries: ``row_sha256`` of the row it scored (a prediction).
SCORED_ROW_FIELD = "scored_row_sha256"


def row_sha256(row: dict[str, Any]) -> str:
    """sha256 of a row's canonical JSON (sorted keys, as written and read back): what a derived row is tied to."""
    canonical = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def scores(derived: dict[str, Any] | None, source: dict[str, Any]) -> bool:
    """Whether ``derived`` (a judgement) was computed from exactly ``source`` (the prediction row as it is now)."""
    return derived is not None and derived.get(SCORED_ROW_FIELD) == row_sha256(source)


def parse_line(raw: bytes, key_field: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """One line of a row file: (the row, None), or (None, why it is not a row)."""
    if not raw.strip():
        return None, "empty line"
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, f"not valid JSON ({err})"
    if not isinstance(row, dict):
        return None, f"not a JSON object ({type(row).__name__})"
    if key_field is not None and key_field not in row:
        return None, f"no `{key_field}` field"
    return row, None


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
        """Load one line (a later line of a key replaces an earlier one); return why it was skipped, or None."""
        row, why = parse_line(raw, self.key_field)
        if row is None:
            return why
        if self.input_hash is not None and row.get(INPUT_HASH_FIELD) != self.input_hash:
            return f"computed from other input files ({INPUT_HASH_FIELD} {row.get(INPUT_HASH_FIELD)!r}, this run {self.input_hash!r})"
        self._rows[str(row[self.key_field])] = row
        return None

    def __contains__(self, key: object) -> bool:
        return str(key) in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._rows.get(str(key))

    def append(self, row: dict[str, Any]) -> None:
        """Write ``row`` unless its key is already held (the first result of a unit of work is kept)."""
        self._write(row, replace=False)

    def replace(self, row: dict[str, Any]) -> None:
        """Write ``row`` even if its key is held: a redone unit of work (a retried failure, a re-judgement)."""
        self._write(row, replace=True)

    def _write(self, row: dict[str, Any], replace: bool) -> None:
        key = str(row[self.key_field])
        if self.input_hash is not None:
            row = {**row, INPUT_HASH_FIELD: self.input_hash}
        line = json.dumps(row, ensure_ascii=False, default=str)
        with self._lock:
            if key in self._rows and not replace:
                return
            size = self.path.stat().st_size if self.path.exists() else 0
            try:
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as err:
                self._cut_back(size)  # no half line for the next append to run into
                if err.errno in NO_SPACE:  # the row file is what could not be written: name it, not a later record
                    raise disk_full(self.path) from err
                raise
            # held as a reload would read it (tuples as lists, objects as strings), so row_sha256 of a row is
            # the same in the process that wrote it and in the one that resumes
            self._rows[key] = json.loads(line)

    def _cut_back(self, size: int) -> None:
        """Truncate the file to ``size`` after a failed append (best effort: the disk may refuse this too)."""
        try:
            with self.path.open("r+b") as handle:
                handle.truncate(size)
        except OSError:
            pass

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:  # run.workers > 1: a reader never sees the dict mid-append
            return list(self._rows.values())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())


def read_rows(path: str | Path, key_field: str | None = "key") -> list[dict[str, Any]]:
    """Every row of a JSONL file written by a run, read only (the file is never touched, so a published or
    still-running run can be read). The one reader for every report and script: a damaged line (not JSON,
    not UTF-8, not an object, such as the torn last line of a killed write) is skipped and logged with the
    file and its line number. With ``key_field`` (row files), one row per key: the last written (a redone
    row replaces its first try), in the order keys first appeared, and a row without the key is skipped and
    logged, as ``JsonlRows`` skips it when a run resumes (one rule for every reader of a row file);
    ``None`` for logs without keys."""
    path = Path(path)
    by_key: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        row, why = parse_line(raw, None)
        if row is None:
            log.warning("%s line %d: %s (a torn last line of a killed run?); skipped", path, number, why)
        elif key_field is None:
            rows.append(row)
        elif key_field not in row:
            log.warning("%s line %d: no `%s` field; skipped (as a resumed run skips it)", path, number, key_field)
        else:
            if str(row[key_field]) not in by_key:
                rows.append(row)
            by_key[str(row[key_field])] = row
    return [by_key[str(row[key_field])] for row in rows] if key_field is not None else rows
