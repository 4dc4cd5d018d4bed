"""core.embed_archive: the embedding cache as deterministic, checked archive lines (the command's round trip: tests/unit/scripts/test_cache_archive.py)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from core.embed_archive import embeddings_archive_for, export_embeddings, import_embeddings
from tests.fakes import fill_vector_cache


def test_the_embedding_archive_sits_beside_the_llm_archive(tmp_path):
    assert embeddings_archive_for(tmp_path / "locomo_conv26.jsonl.gz").name == "locomo_conv26.embeddings.jsonl.gz"


def test_embedding_export_is_deterministic_and_a_damaged_line_is_named(tmp_path):
    vectors = {f"k{i}": np.full(3, i, np.float32) for i in range(3)}
    fill_vector_cache(tmp_path / "a", vectors)
    fill_vector_cache(tmp_path / "b", dict(reversed(list(vectors.items()))))
    assert export_embeddings(tmp_path / "a", tmp_path / "a.gz") == 3
    export_embeddings(tmp_path / "b", tmp_path / "b.gz")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()
    with gzip.open(tmp_path / "bad.gz", "wt") as bad:
        bad.write(json.dumps({"key": "k", "vec": "AAA"}) + "\n")
    with pytest.raises(SystemExit, match="line 1 is not an embedding entry"):
        import_embeddings(tmp_path / "bad.gz", tmp_path / "c")
