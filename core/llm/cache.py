"""SQLite response cache keyed by the whole request (model, messages, sampling, schema).

Several processes may share one cache file (a sweep's jobs, two runs at once): SQLite's WAL
journal lets readers and one writer work together, and every statement waits up to
``busy_timeout_s`` for another process's write instead of failing. A damaged file is reported
with its path and the fix (delete it; the cache is only a cache), never as a bare sqlite error.

Each entry carries the SHA-256 of its stored text, so a changed byte inside a cached reply is
caught on read: a miss plus a warning naming the cache file, and the fresh reply replaces the entry.
Entries written before checksums existed (older cache files, archives imported with older code)
have none: they are trusted on their first read and checksummed then, so they stay hits.
An archive import (scripts/cache_archive.py) checksums each entry as it stores it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

from filelock import FileLock

from core.api import HarnessError
from core.atomic import DiskFullError, disk_full

log = logging.getLogger(__name__)


class CacheError(HarnessError):
    """The cache file cannot be used; the message names it and says to delete it."""


# Free bytes below which an SQLite I/O error on a cache file is taken for a full disk: SQLite reports a disk
# that fills while it grows its shared-memory or journal file as SQLITE_IOERR_*, not SQLITE_FULL
LOW_SPACE_BYTES = 1 << 20


def full_disk_under(path: Path, err: sqlite3.Error) -> DiskFullError | None:
    """A DiskFullError naming ``path`` when ``err`` is SQLite's answer to a full disk (SQLITE_FULL, or an I/O
    error while its folder has almost no space left); None for anything else (the file may then be damaged)."""
    name = str(getattr(err, "sqlite_errorname", "") or "")
    if name == "SQLITE_FULL" or "disk is full" in str(err):
        return disk_full(path)
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in str(err):
        try:
            if shutil.disk_usage(path.parent).free < LOW_SPACE_BYTES:
                return disk_full(path)
        except OSError:
            return None
    return None


def checksum(value_json: str) -> str:
    """SHA-256 of an entry's stored JSON text: what a read compares to catch a changed byte."""
    return hashlib.sha256(value_json.encode()).hexdigest()


def request_key(request: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a request: the cache key."""
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache:
    """SQLite key -> response store; safe for several threads and several processes."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # Opening is serialised across processes: a file another process has just created is 0 bytes until
        # its first statement writes the header, so only under this lock does 0 bytes mean "damaged".
        with FileLock(str(self.path) + ".open.lock", timeout=busy_timeout_s):
            if self.path.exists() and self.path.stat().st_size == 0:
                # SQLite would take a zero-byte file as a new database; here it is a damaged copy or a full disk
                raise CacheError(f"response cache {self.path} is an empty (0-byte) file, not a database: delete it to start a fresh cache")
            try:
                self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=busy_timeout_s)
                self._conn.execute("PRAGMA journal_mode=WAL")  # writes the header: the file is no longer empty
                self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT)")
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(responses)")}
                if "checksum" not in columns:  # a cache file from before checksums: its entries are checksummed on first read
                    self._conn.execute("ALTER TABLE responses ADD COLUMN checksum TEXT")
                self._conn.commit()
            except sqlite3.DatabaseError as err:
                raise self._damaged(err) from err

    def _damaged(self, err: sqlite3.DatabaseError) -> HarnessError:
        """The one-line error for a failed statement: a full disk (the file is intact: free space), a lock held too
        long, or a damaged file (delete it)."""
        full = full_disk_under(self.path, err)
        if full is not None:
            return full
        if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
            return CacheError(f"response cache {self.path} stayed locked by another process: {err}; retry, or give each run its own cache_dir")
        return CacheError(f"response cache {self.path} is damaged ({err}): delete the file (and its -wal/-shm files) to start a fresh cache")

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        return request_key(request)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response, or None: absent, not JSON, or failing its checksum (warned, naming the file)."""
        try:
            with self._lock:
                row = self._conn.execute("SELECT value, checksum FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err
        if not row:
            return None
        value_json, stored_sum = row
        if stored_sum is not None and stored_sum != checksum(value_json):
            log.warning("response cache %s: the entry for request %s fails its checksum (changed on disk since it was "
                        "written); treated as a miss, the fresh reply replaces it", self.path, key[:16])  # fmt: skip
            return None
        try:
            value = json.loads(value_json)
        except json.JSONDecodeError:
            log.warning("response cache %s: the entry for request %s is not JSON; treated as a miss", self.path, key[:16])
            return None  # a damaged entry is a miss; the fresh response replaces it
        if stored_sum is None:
            self._adopt(key, value_json)
        return value

    def _adopt(self, key: str, value_json: str) -> None:
        """Checksum an entry written before checksums existed, as it reads now (trust on first read)."""
        try:
            with self._lock:
                self._conn.execute("UPDATE responses SET checksum = ? WHERE key = ? AND value = ? AND checksum IS NULL",
                                   (checksum(value_json), key, value_json))  # fmt: skip
                self._conn.commit()
        except sqlite3.OperationalError as err:  # a read-only copy still serves its entries, unchecksummed
            if "readonly" not in str(err):
                raise self._damaged(err) from err
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err

    def put(self, key: str, value: dict[str, Any]) -> None:
        value_json = json.dumps(value)
        try:
            with self._lock:
                self._conn.execute("INSERT OR REPLACE INTO responses (key, value, checksum) VALUES (?, ?, ?)",
                                   (key, value_json, checksum(value_json)))  # fmt: skip
                self._conn.commit()
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err

    def items(self) -> list[tuple[str, str]]:
        """Every (key, stored JSON text) pair, sorted by key: what an archive of the cache holds.

        An entry failing its checksum is left out (with a warning naming the file), so an export never
        carries a changed reply onward.
        """
        try:
            with self._lock:
                rows = list(self._conn.execute("SELECT key, value, checksum FROM responses ORDER BY key"))
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err
        bad = [key for key, value, stored_sum in rows if stored_sum is not None and stored_sum != checksum(value)]
        if bad:
            log.warning("response cache %s: %d entries fail their checksum and are left out: %s",
                        self.path, len(bad), ", ".join(key[:16] for key in bad[:5]))  # fmt: skip
        return [(key, value) for key, value, stored_sum in rows if stored_sum is None or stored_sum == checksum(value)]

    def put_absent(self, key: str, value_json: str) -> bool:
        """Store a JSON text under ``key`` unless the key is held; True when it was stored (checksummed as stored)."""
        try:
            with self._lock:
                cursor = self._conn.execute("INSERT OR IGNORE INTO responses (key, value, checksum) VALUES (?, ?, ?)",
                                            (key, value_json, checksum(value_json)))  # fmt: skip
                self._conn.commit()
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err
        return cursor.rowcount == 1

    def delete(self, key: str) -> None:
        """Forget one entry (a cached response that no longer passes validation)."""
        try:
            with self._lock:
                self._conn.execute("DELETE FROM responses WHERE key = ?", (key,))
                self._conn.commit()
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err

    def close(self) -> None:
        with self._lock:
            self._conn.close()
