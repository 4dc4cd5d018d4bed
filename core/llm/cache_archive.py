"""A committable archive of the LLM response cache: export, import and read, deterministic bytes.

Why a module of its own: the ``scripts.cache_archive`` command and the research tools that read an
archive (research.judge_scores, research.reply_sizes) share one reader, so an archive is checked the same
way everywhere. Export writes one JSON line per entry, sorted by key, gzip with a fixed mtime and no file
name in its header, so the same cache gives the same bytes. Import never overwrites an entry the target
already holds, reads the whole archive first (gzip's CRC then refuses a changed byte before anything is
stored) and stores each entry with its checksum (core/llm/cache.py), so every later read of it is checked too.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.atomic import write_bytes_atomic
from core.llm.cache import ResponseCache

CACHE_FILE = "llm_cache.sqlite"  # the file name conf/llm/*.yaml give cache_path inside cache_dir


def export_cache(cache_dir: Path, archive: Path) -> int:
    """Write every entry of ``cache_dir``'s LLM cache to ``archive``; returns the number written."""
    source = cache_dir / CACHE_FILE
    if not source.is_file():
        raise SystemExit(f"no LLM cache at {source}: pass the cache_dir a run used (MOSAIC_CACHE_DIR, default <repo>/.cache)")
    cache = ResponseCache(source)
    try:
        rows = cache.items()
    finally:
        cache.close()
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed:
        for key, value in rows:
            packed.write((json.dumps({"key": key, "value": json.loads(value)}, sort_keys=True, ensure_ascii=False) + "\n").encode())
    write_bytes_atomic(archive, raw.getvalue())  # a session killed mid-export keeps the previous archive whole
    return len(rows)


def archive_entries(archive: Path) -> Iterator[tuple[str, Any]]:
    """(key, response) for each line of ``archive``; a missing archive fails here, before anything is read."""
    if not archive.is_file():
        raise SystemExit(
            f"no cache archive at {archive}: results/caches/ lists the committed ones, "
            f"and `python -m scripts.cache_archive export <cache_dir> {archive}` writes one"
        )
    return _read_entries(archive)


def _read_entries(archive: Path) -> Iterator[tuple[str, Any]]:
    try:  # whole, before anything is stored: gzip checks its CRC at the end, so a changed byte fails here
        with gzip.open(archive, "rt", encoding="utf-8") as packed:
            lines = packed.readlines()
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as err:
        raise SystemExit(f"{archive} is damaged ({err}): fetch it again (git checkout -- {archive}) or re-export it") from err
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            key, value = entry["key"], entry["value"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise SystemExit(f"{archive} line {number} is not a cache entry ({err}): re-export it with `export`") from err
        yield key, value


def import_cache(archive: Path, cache_dir: Path) -> tuple[int, int]:
    """Add the archive's entries that ``cache_dir`` lacks; returns (added, already held)."""
    entries = archive_entries(archive)
    cache = ResponseCache(cache_dir / CACHE_FILE)
    added = held = 0
    try:
        for key, value in entries:
            if cache.put_absent(key, json.dumps(value)):
                added += 1
            else:
                held += 1
    finally:
        cache.close()
    return added, held
