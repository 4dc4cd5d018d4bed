"""How many tokens MOSAIC's extraction replies take as named objects and as positional rows.

Why: the rows format (``system.extract.output_format=rows``) is worth trying only if the key names are a large
share of what the model generates. This reads the extraction replies of a response-cache archive (the default
format's, one message per call), writes each reply's facts in both shapes and counts their tokens with the local
model's own tokenizer (the server's ``/tokenize``). No generation.

    python -m research.extraction_tokens results/caches/locomo_conv26_4ab9d89.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import httpx

from core.llm.local_server import LocalLLM
from mosaic.extract_prompts import FIELDS, as_row


def object_replies(archive: Path) -> list[list[dict]]:
    """The fact lists of the archive's default-format extraction replies (group and held-fact replies left out)."""
    found = []
    with gzip.open(archive, "rt") as lines:
        for line in lines:
            text = json.loads(line)["value"].get("text") or ""
            if not text.startswith('{"facts":'):
                continue
            try:
                facts = json.loads(text)["facts"]
            except (json.JSONDecodeError, KeyError):
                continue
            if all(isinstance(f, dict) and set(f) == set(FIELDS) for f in facts):
                found.append(facts)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path, help="a response-cache archive (scripts.cache_archive export)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    args = parser.parse_args()
    replies = object_replies(args.archive)
    llm = LocalLLM(model=args.model, parallel=1, context_tokens=2048)
    llm.start()
    base = llm.base_url.removesuffix("/v1")
    try:
        def tokens(text: str) -> int:
            return len(httpx.post(f"{base}/tokenize", json={"content": text}).json()["tokens"])

        as_objects = sum(tokens(json.dumps({"facts": facts}, separators=(",", ":"))) for facts in replies)
        as_rows = sum(tokens(json.dumps({"facts": [as_row(f) for f in facts]}, separators=(",", ":"))) for facts in replies)
    finally:
        llm.close()
    n_facts = sum(len(facts) for facts in replies)
    print(f"{len(replies)} replies, {n_facts} facts: {as_objects} tokens as objects, {as_rows} as rows ({as_rows / as_objects:.2f})")


if __name__ == "__main__":
    main()
