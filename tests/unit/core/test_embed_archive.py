"""core.embed_archive: the embedding cache as deterministic, checked archive lines (the command's round trip: tests/unit/scripts/test_cache_archive.py)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from core.embed import EMBED_CACHE_FILE, open_vector_cache
from core.embed_archive import embeddings_archive_for, export_embeddings, import_embeddings


def _fill_vectors(cache_dir, vectors):
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache = open_vector_cache(cache_dir / EMBED_CACHE_FILE)
    cache.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", [(k, v.tobytes()) for k, v in vectors.items()])
    cache.commit()
    cache.close()


def test_the_embedding_archive_sits_beside_the_llm_archive(tmp_path):
    assert embeddings_archive_for(tmp_path / "locomo_conv26.jsonl.gz").name == "locomo_conv26.embeddings.jsonl.gz"


def test_embedding_export_is_deterministic_and_a_damaged_line_is_named(tmp_path):
    vectors = {f"k{i}": np.full(3, i, np.float32) for i in range(3)}
    _fill_vectors(tmp_path / "a", vectors)
    _fill_vectors(tmp_path / "b", dict(reversed(list(vectors.items()))))
    assert export_embeddings(tmp_path / "a", tmp_path / "a.gz") == 3
    export_embeddings(tmp_path / "b", tmp_path / "b.gz")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()
    with gzip.open(tmp_path / "bad.gz", "wt") as bad:
        bad.write(json.dumps({"key": "k", "vec": "AAA"}) + "\n")
    with pytest.raises(SystemExit, match="line 1 is not an embedding entry"):
        import_embeddings(tmp_path / "bad.gz", tmp_path / "c")
