"""Carry an LLM response cache between machines as a small, deterministic, committable file.

    python -m scripts.cache_archive export <cache_dir> <archive.jsonl.gz>
    python -m scripts.cache_archive import <archive.jsonl.gz> <cache_dir>

Why: a conversation-scale MOSAIC run (about 2 h of ingest on 2 CPU cores) does not fit one
working session, and a fresh machine starts with an empty cache. The cache keys are hashes of
whole requests and the values are the responses only (no prompts), so an archive of a run's
cache is a few hundred KB: committed under results/caches/, it lets the next machine (or a
reader) replay every call already made, bit for bit, and pay only for the calls still missing.
Replay is exact because a key covers model, messages, sampling and schema (core/llm/cache.py);
a changed prompt misses and is asked again.

Export writes one JSON line per entry, sorted by key, gzip with a fixed mtime and no file name in its header, so the same cache
gives the same bytes. Import never overwrites an entry the target already holds, reads the whole archive
first (gzip's CRC then refuses a changed byte before anything is stored) and stores each entry with its
checksum (core/llm/cache.py), so every later read of it is checked too.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.atomic import write_bytes_atomic  # noqa: E402
from core.llm.cache import ResponseCache  # noqa: E402

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    exporter = commands.add_parser("export", help="cache_dir -> archive")
    exporter.add_argument("cache_dir", type=Path)
    exporter.add_argument("archive", type=Path)
    importer = commands.add_parser("import", help="archive -> cache_dir (adds missing entries only)")
    importer.add_argument("archive", type=Path)
    importer.add_argument("cache_dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "export":
        count = export_cache(args.cache_dir, args.archive)
        print(f"exported {count} responses to {args.archive} ({args.archive.stat().st_size / 1024:.0f} KiB)")
    else:
        added, held = import_cache(args.archive, args.cache_dir)
        print(f"imported {added} responses into {args.cache_dir / CACHE_FILE} ({held} already held)")


if __name__ == "__main__":
    main()
