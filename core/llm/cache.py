"""SQLite response cache keyed by the whole request (model, messages, sampling, schema).

Several processes may share one cache file (a sweep's jobs, two runs at once): SQLite's WAL
journal lets readers and one writer work together, and every statement waits up to
``busy_timeout_s`` for another process's write instead of failing. A damaged file is reported
with its path and the fix (delete it; the cache is only a cache), never as a bare sqlite error.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from filelock import FileLock

from core.api import HarnessError


class CacheError(HarnessError):
    """The cache file cannot be used; the message names it and says to delete it."""


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
                self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                self._conn.commit()
            except sqlite3.DatabaseError as err:
                raise self._damaged(err) from err

    def _damaged(self, err: sqlite3.DatabaseError) -> CacheError:
        if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
            return CacheError(f"response cache {self.path} stayed locked by another process: {err}; retry, or give each run its own cache_dir")
        return CacheError(f"response cache {self.path} is damaged ({err}): delete the file (and its -wal/-shm files) to start a fresh cache")

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        return request_key(request)

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            with self._lock:
                row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err
        if not row:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:
            return None  # a damaged entry is a miss; the fresh response replaces it

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            with self._lock:
                self._conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(value)))
                self._conn.commit()
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err

    def items(self) -> list[tuple[str, str]]:
        """Every (key, stored JSON text) pair, sorted by key: what an archive of the cache holds."""
        try:
            with self._lock:
                return list(self._conn.execute("SELECT key, value FROM responses ORDER BY key"))
        except sqlite3.DatabaseError as err:
            raise self._damaged(err) from err

    def put_absent(self, key: str, value_json: str) -> bool:
        """Store a JSON text under ``key`` unless the key is held; True when it was stored."""
        try:
            with self._lock:
                cursor = self._conn.execute("INSERT OR IGNORE INTO responses VALUES (?, ?)", (key, value_json))
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
