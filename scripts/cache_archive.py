"""Carry an LLM response cache between machines as a small, deterministic, committable file.

    python -m scripts.cache_archive export <cache_dir> <archive.jsonl.gz> [--embeddings]
    python -m scripts.cache_archive import <archive.jsonl.gz> <cache_dir>

Why: a conversation-scale MOSAIC run (about 2 h of ingest on 2 CPU cores) does not fit one
working session, and a fresh machine starts with an empty cache. The cache keys are hashes of
whole requests and the values are the responses only (no prompts), so an archive of a run's
cache is a few hundred KB: committed under results/caches/, it lets the next machine (or a
reader) replay every call already made, bit for bit, and pay only for the calls still missing.
Replay is exact because a key covers model, messages, sampling and schema (core/llm/cache.py);
a changed prompt misses and is asked again.

Export and import print the model(s) the replies came from. Export writes one JSON line per entry, sorted by key, gzip with a fixed mtime and no file name in its header, so the same cache
gives the same bytes. Import never overwrites an entry the target already holds, reads the whole archive
first (gzip's CRC then refuses a changed byte before anything is stored) and stores each entry with its
checksum (core/llm/cache.py), so every later read of it is checked too.

``--embeddings`` also writes the embedding cache beside it (``<archive>.embeddings.jsonl.gz``,
core/embed_archive.py): without the vectors a rerun re-embeds every text in other batches, and MiniLM's
batch-dependent rounding reorders near-tied retrieval scores, so a cached rerun asks other questions
(docs/reliability.md). Import reads that file too when it is there.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.embed_archive import embeddings_archive_for, export_embeddings, import_embeddings, read_embeddings
from core.llm.cache_archive import CACHE_FILE, archive_entries, archive_models, export_cache, import_cache

__all__ = ["CACHE_FILE", "archive_entries", "archive_models", "export_cache", "import_cache", "main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    exporter = commands.add_parser("export", help="cache_dir -> archive")
    exporter.add_argument("cache_dir", type=Path)
    exporter.add_argument("archive", type=Path)
    exporter.add_argument("--embeddings", action="store_true", help="also write the embedding cache to <archive>.embeddings.jsonl.gz")
    importer = commands.add_parser("import", help="archive -> cache_dir (adds missing entries only)")
    importer.add_argument("archive", type=Path)
    importer.add_argument("cache_dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "export":
        count = export_cache(args.cache_dir, args.archive)
        print(f"exported {count} responses to {args.archive} ({args.archive.stat().st_size / 1024:.0f} KiB), made with "
              + ", ".join(f"{model} ({n})" for model, n in sorted(archive_models(args.archive).items())))
        if args.embeddings:
            vectors = embeddings_archive_for(args.archive)
            count = export_embeddings(args.cache_dir, vectors)
            print(f"exported {count} vectors to {vectors} ({vectors.stat().st_size / 1024:.0f} KiB)")
    else:
        vectors = embeddings_archive_for(args.archive)
        models = archive_models(args.archive)  # every line read and checked; nothing stored yet
        if vectors.is_file():
            read_embeddings(vectors)  # a cut or damaged vector file fails here, before any reply is stored without its vectors
        print("made with " + ", ".join(f"{model} ({n} replies)" for model, n in sorted(models.items())))
        added, held = import_cache(args.archive, args.cache_dir)
        print(f"imported {added} responses into {args.cache_dir / CACHE_FILE} ({held} already held)")
        if vectors.is_file():
            added, held = import_embeddings(vectors, args.cache_dir)
            print(f"imported {added} vectors from {vectors} ({held} already held)")
        else:
            print(f"no embedding archive beside it ({vectors.name}): texts are embedded afresh, so retrieval may differ by rounding")


if __name__ == "__main__":
    main()
