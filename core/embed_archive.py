"""A committable archive of the embedding cache, beside a run's LLM cache archive, so a cached rerun is exact.

Why: a MiniLM vector depends, by about 1e-7, on which other texts share its encoding batch (padding and
kernel blocking), and which texts share a batch depends on what the cache already held. Replaying only the
LLM replies therefore re-embeds every text in other batches; near-tied scores then order differently, other
memories are retrieved, answer prompts change and are asked live: the cached rerun of the published conv-26
MOSAIC row at its own commit gave other metrics (docs/reliability.md). Carrying the vectors
themselves removes that source. Same conventions as the LLM archive (core/llm/cache_archive.py): one JSON
line per entry sorted by key (the vector as base64 of its float32 bytes, so replay is bit-exact), gzip with a
fixed mtime and no file name, import never overwrites an entry the target holds and reads the whole archive
(gzip's CRC) before storing anything. The file sits beside the LLM archive: ``X.jsonl.gz`` ->
``X.embeddings.jsonl.gz``.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import zlib
from pathlib import Path

from core.atomic import write_bytes_atomic
from core.embed import EMBED_CACHE_FILE, open_vector_cache, store_vectors, vector_checksum

SUFFIX = ".jsonl.gz"


def embeddings_archive_for(llm_archive: Path) -> Path:
    """The embedding archive that goes with an LLM cache archive (``X.jsonl.gz`` -> ``X.embeddings.jsonl.gz``)."""
    name = llm_archive.name
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else llm_archive.stem
    return llm_archive.with_name(f"{stem}.embeddings{SUFFIX}")


def export_embeddings(cache_dir: Path, archive: Path) -> int:
    """Write every vector of ``cache_dir``'s embedding cache to ``archive``; returns the number written."""
    source = cache_dir / EMBED_CACHE_FILE
    if not source.is_file():
        raise SystemExit(f"no embedding cache at {source}: pass the cache_dir a run used (MOSAIC_CACHE_DIR, default <repo>/.cache)")
    cache = open_vector_cache(source)
    try:
        rows = [(key, vec) for key, vec, stored in cache.execute("SELECT key, vec, checksum FROM vectors ORDER BY key")
                if stored is None or stored == vector_checksum(key, bytes(vec))]  # a changed vector is not carried onward
    finally:
        cache.close()
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed:
        for key, vec in rows:
            packed.write((json.dumps({"key": key, "vec": base64.b64encode(bytes(vec)).decode()}, sort_keys=True) + "\n").encode())
    write_bytes_atomic(archive, raw.getvalue())
    return len(rows)


def read_embeddings(archive: Path) -> list[tuple[str, bytes]]:
    """(key, float32 bytes) of every line, all read and checked before the caller stores any."""
    try:
        with gzip.open(archive, "rt", encoding="utf-8") as packed:
            lines = packed.readlines()
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as err:
        raise SystemExit(f"{archive} is damaged ({err}): fetch it again (git checkout -- {archive}) or re-export it") from err
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            vec = base64.b64decode(entry["vec"], validate=True)
            if len(vec) % 4 or not vec:
                raise ValueError(f"{len(vec)} bytes is not a float32 vector")
            if entries and len(vec) != len(entries[0][1]):  # one model, one dimension: a cut or foreign vector
                raise ValueError(f"{len(vec) // 4} dimensions where line 1 has {len(entries[0][1]) // 4}")
            entries.append((str(entry["key"]), vec))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise SystemExit(f"{archive} line {number} is not an embedding entry ({err}): re-export it with `export --embeddings`") from err
    return entries


def import_embeddings(archive: Path, cache_dir: Path) -> tuple[int, int]:
    """Add the archive's vectors that ``cache_dir`` lacks; returns (added, already held)."""
    entries = read_embeddings(archive)
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache = open_vector_cache(cache_dir / EMBED_CACHE_FILE)
    try:
        added = store_vectors(cache, entries, replace=False)
        cache.commit()
    finally:
        cache.close()
    return added, len(entries) - added
