"""The cache archive carries responses between machines exactly, deterministically, and never overwrites."""

from __future__ import annotations

import gzip
import json

import pytest

from core.llm.cache import ResponseCache, request_key
from tests.conftest import REPO
from tests.fakes import fill_vector_cache
from tests.script_loader import load_script

archive_tool = load_script("cache_archive")


def _fill(cache_dir, entries):
    cache = ResponseCache(cache_dir / archive_tool.CACHE_FILE)
    for request, response in entries:
        cache.put(request_key(request), response)
    cache.close()


def _read(cache_dir):
    cache = ResponseCache(cache_dir / archive_tool.CACHE_FILE)
    try:
        return {key: json.loads(value) for key, value in cache.items()}
    finally:
        cache.close()


def _reply(text: str, prompt_tokens: int = 1) -> dict:
    """A cached reply as the client stores it (core.api.ChatResult's fields): an archive holds nothing else."""
    return {"text": text, "prompt_tokens": prompt_tokens, "completion_tokens": 2, "latency_s": 0.5, "model": "m"}


ENTRIES = [({"model": "m", "messages": [{"role": "user", "content": f"turn {i}"}]}, _reply(f"reply {i}", i)) for i in range(5)]


def test_round_trip_replays_every_response(tmp_path):
    _fill(tmp_path / "a", ENTRIES)
    archive = tmp_path / "a.jsonl.gz"
    assert archive_tool.export_cache(tmp_path / "a", archive) == 5
    assert archive_tool.import_cache(archive, tmp_path / "b") == (5, 0)
    assert _read(tmp_path / "b") == _read(tmp_path / "a")
    restored = ResponseCache(tmp_path / "b" / archive_tool.CACHE_FILE)
    assert restored.get(request_key(ENTRIES[3][0])) == _reply("reply 3", 3)
    restored.close()


def test_export_is_byte_identical_for_the_same_content(tmp_path):
    _fill(tmp_path / "a", ENTRIES)
    _fill(tmp_path / "b", list(reversed(ENTRIES)))  # other insertion order, same content
    archive_tool.export_cache(tmp_path / "a", tmp_path / "a.gz")
    archive_tool.export_cache(tmp_path / "b", tmp_path / "b.gz")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()
    keys = [json.loads(line)["key"] for line in gzip.open(tmp_path / "a.gz", "rt")]
    assert keys == sorted(keys)


def test_import_keeps_entries_the_target_holds(tmp_path):
    _fill(tmp_path / "a", ENTRIES)
    archive_tool.export_cache(tmp_path / "a", tmp_path / "a.gz")
    _fill(tmp_path / "b", [(ENTRIES[0][0], _reply("newer"))])
    assert archive_tool.import_cache(tmp_path / "a.gz", tmp_path / "b") == (4, 1)
    assert _read(tmp_path / "b")[request_key(ENTRIES[0][0])] == _reply("newer")


def test_errors_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="no LLM cache at .*llm_cache.sqlite"):
        archive_tool.export_cache(tmp_path / "missing", tmp_path / "x.gz")
    with pytest.raises(SystemExit, match="no cache archive at .*results/caches"):
        archive_tool.import_cache(tmp_path / "missing.gz", tmp_path / "c")
    broken = tmp_path / "broken.gz"
    with gzip.open(broken, "wt") as out:
        out.write('{"key": "k"}\n')
    with pytest.raises(SystemExit, match="line 1 is not a cache entry"):
        archive_tool.import_cache(broken, tmp_path / "c")


def test_published_archive_imports_checksummed_and_replays_every_entry(tmp_path):
    import sqlite3
    archive = REPO / "results" / "caches" / "conflict_household_zep.jsonl.gz"
    published = dict(archive_tool.archive_entries(archive))  # written before entries carried checksums
    added, held = archive_tool.import_cache(archive, tmp_path / "c")
    assert (added, held) == (len(published), 0) and added > 0
    path = tmp_path / "c" / archive_tool.CACHE_FILE
    conn = sqlite3.connect(path)
    unchecked = conn.execute("SELECT count(*) FROM responses WHERE checksum IS NULL").fetchone()[0]
    conn.close()
    assert unchecked == 0  # the import checksums each entry as it stores it
    cache = ResponseCache(path)
    try:
        assert all(cache.get(key) == value for key, value in published.items())
    finally:
        cache.close()


def test_a_changed_byte_in_an_archive_stores_nothing_and_names_the_archive(tmp_path):
    _fill(tmp_path / "a", ENTRIES)
    archive = tmp_path / "a.jsonl.gz"
    archive_tool.export_cache(tmp_path / "a", archive)
    packed = bytearray(archive.read_bytes())
    packed[len(packed) // 2] ^= 0x01  # one bit inside the compressed replies
    archive.write_bytes(bytes(packed))
    with pytest.raises(SystemExit, match=r"a\.jsonl\.gz (is damaged|line \d+ is not a cache entry)"):
        archive_tool.import_cache(archive, tmp_path / "b")
    assert _read(tmp_path / "b") == {}  # nothing half-imported


def test_embeddings_travel_bit_exact_beside_the_responses(tmp_path):
    """A cached rerun re-embeds nothing: the vectors come back byte for byte, and the import finds their file."""
    import numpy as np

    from core.embed import SentenceEmbedder

    rng = np.random.default_rng(0)
    embedder = SentenceEmbedder(cache_path=str(tmp_path / "a" / "embed_cache.sqlite"))
    vectors = {embedder._key(f"text {i}"): rng.standard_normal(384).astype(np.float32) for i in range(4)}
    embedder.close()
    _fill(tmp_path / "a", ENTRIES)
    fill_vector_cache(tmp_path / "a", vectors)
    archive = tmp_path / "run.jsonl.gz"
    archive_tool.main(["export", str(tmp_path / "a"), str(archive), "--embeddings"])
    assert (tmp_path / "run.embeddings.jsonl.gz").is_file()
    fill_vector_cache(tmp_path / "b", {next(iter(vectors)): np.zeros(384, np.float32)})  # held: never overwritten
    archive_tool.main(["import", str(archive), str(tmp_path / "b")])
    restored = SentenceEmbedder(cache_path=str(tmp_path / "b" / "embed_cache.sqlite"))
    got = restored.encode(["text 1", "text 2", "text 3"])  # all cached: the model is never loaded
    assert restored._model is None
    assert np.array_equal(got, np.vstack([vectors[restored._key(f"text {i}")] for i in (1, 2, 3)]))
    assert not restored.encode(["text 0"]).any()
    restored.close()

