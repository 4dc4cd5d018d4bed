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
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.atomic import write_bytes_atomic
from core.api import ChatResult
from core.llm.cache import ResponseCache
from core.llm.client import OUTPUT_FAULT

REQUEST_KEY = re.compile(r"[0-9a-f]{64}")  # core.llm.cache.request_key: a sha256 hex digest
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
    """(key, response) for each line of ``archive``, every line read and checked before the first is given: a
    missing, damaged or ill-shaped archive fails here (one line naming the line), before anything is stored."""
    return iter(_read_entries(archive, servable=False))


def _require(archive: Path) -> None:
    if not archive.is_file():
        raise SystemExit(
            f"no cache archive at {archive}: results/caches/ lists the committed ones, "
            f"and `python -m scripts.cache_archive export <cache_dir> {archive}` writes one"
        )


def _read_entries(archive: Path, servable: bool = True) -> list[tuple[str, Any]]:
    """Every (key, value) line; ``servable``: each must also be an entry a client can serve (``entry_problem``),
    as an import needs (a reader of replies, research/judge_scores.py, needs only the JSON)."""
    _require(archive)
    try:  # whole, before anything is stored: gzip checks its CRC at the end, so a changed byte fails here
        with gzip.open(archive, "rt", encoding="utf-8") as packed:
            lines = packed.readlines()
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as err:
        raise SystemExit(f"{archive} is damaged ({err}): fetch it again (git checkout -- {archive}) or re-export it") from err
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            key, value = entry["key"], entry["value"]
            entries.append((key, value))
            why = entry_problem(key, value) if servable else None
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            why = str(err)
        if why:
            raise SystemExit(f"{archive} line {number} is not a cache entry ({why}): nothing was imported; re-export it with `export`")
    return entries


def entry_problem(key: Any, value: Any) -> str | None:
    """Why an archived entry could not be served by the clients that read the cache (None: it can): the key is
    a request hash, the value a harness reply (core.api.ChatResult's fields, maybe marked as a remembered fault)
    or an OpenAI chat completion (the library tap's, core/llm/library_tap.py)."""
    if not (isinstance(key, str) and REQUEST_KEY.fullmatch(key)):
        return f"key {str(key)[:20]!r} is not a request hash"
    if not isinstance(value, dict):
        return f"value is a {type(value).__name__}, not an object"
    if "choices" in value:
        return None if isinstance(value["choices"], list) else "`choices` is not a list"
    try:
        result = ChatResult(**{**{k: v for k, v in value.items() if k != OUTPUT_FAULT}, "cached": True})
    except TypeError as err:
        return f"not a reply: {err}"
    return None if isinstance(result.text, str) else "`text` is not a string"


def archive_models(archive: Path) -> Counter[str]:
    """How many replies of ``archive`` each model gave (a reply records its model; a library's completion too)."""
    return Counter(str(value.get("model") or "unknown") for _, value in _read_entries(archive))


def import_cache(archive: Path, cache_dir: Path) -> tuple[int, int]:
    """Add the archive's entries that ``cache_dir`` lacks; returns (added, already held). Every line is read and
    checked first (``entry_problem``): a bad line stores nothing, rather than half an archive."""
    entries = _read_entries(archive)
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
