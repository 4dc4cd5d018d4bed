"""How long the structured replies in a cache archive are: where a system's output guard values come from.

    python -m research.reply_sizes results/caches/locomo_quickstart_zep.jsonl.gz

For each kind of structured reply (named by its top-level JSON keys) it prints how many were good and how many were
cut off at max_tokens (finish_reason length), the largest completion_tokens of a good one, and the longest list
in a good one: conf/system/*.yaml sets max_tokens near the first and max_items above the second (docs/baselines.md,
"Output guards"). Library replies (Mem0, A-Mem, Zep: OpenAI chat.completion objects) are read; the harness
client's own entries (no ``choices``) are counted apart.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any


from core.llm.schema_caps import longest_list
from core.llm.cache_archive import archive_entries


def _kind(content: str) -> tuple[str, Any]:
    """(the reply's top-level keys, the parsed reply or None when it does not parse)."""
    try:
        parsed = json.loads(content)
    except json.JSONDecodeError:
        first = content.split('"')[1] if content.count('"') >= 2 else "?"
        return first, None
    return ",".join(sorted(parsed)) if isinstance(parsed, dict) else type(parsed).__name__, parsed


def reply_sizes(archive: Path) -> dict[str, Any]:
    """Per reply kind: good, cut_off, max_completion_tokens (good), longest_list (good); plus harness entries."""
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: {"good": 0, "cut_off": 0, "max_completion_tokens": 0, "longest_list": 0})
    harness = 0
    for _, value in archive_entries(archive):
        if not isinstance(value, dict) or "choices" not in value:
            harness += 1
            continue
        choice = (value.get("choices") or [{}])[0]
        content = ((choice.get("message") or {}).get("content") or "").strip()
        kind, parsed = _kind(content)
        row = kinds[kind]
        if choice.get("finish_reason") == "length" or parsed is None:
            row["cut_off"] += 1
            continue
        row["good"] += 1
        row["max_completion_tokens"] = max(row["max_completion_tokens"], int((value.get("usage") or {}).get("completion_tokens") or 0))
        row["longest_list"] = max(row["longest_list"], longest_list(parsed))
    return {"kinds": dict(sorted(kinds.items())), "harness_entries": harness}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive", type=Path)
    args = parser.parse_args(argv)
    sizes = reply_sizes(args.archive)
    print(f"{'reply (top-level keys)':<42} {'good':>5} {'cut off':>8} {'max tokens':>11} {'longest list':>13}")
    for kind, row in sizes["kinds"].items():
        print(f"{kind:<42} {row['good']:>5} {row['cut_off']:>8} {row['max_completion_tokens']:>11} {row['longest_list']:>13}")
    print(f"harness client entries (not library replies): {sizes['harness_entries']}")


if __name__ == "__main__":
    main()
