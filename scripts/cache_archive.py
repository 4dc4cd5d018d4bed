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
from pathlib import Path

from core.llm.cache_archive import CACHE_FILE, archive_entries, export_cache, import_cache

__all__ = ["CACHE_FILE", "archive_entries", "export_cache", "import_cache", "main"]


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
