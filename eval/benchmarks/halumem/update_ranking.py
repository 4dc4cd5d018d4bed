"""The LLM-free companion of HaluMem's update judge: does the search rank the current version above the replaced one?

For each update point the benchmark searched (``update_k`` results), a returned item states the NEW version when its
cosine with the point's content reaches ``similarity`` and beats its cosine with every original memory, and states
the ORIGINAL when its best cosine with an original memory reaches ``similarity`` and beats its cosine with the new
version (the run's embedder; ``similarity`` is the benchmark's ``link_held_similarity``, the cosine at which two
texts restate one fact). ``rank_new`` / ``rank_old`` are the 1-based ranks of the first such items (None: none
returned). ``new_above_old`` = the new version is returned and ranks above any returned original: what a system
that supersedes should achieve and an append-only store achieves only by chance. It needs no judge, so it stands
where the small judge's update verdicts do not reach the bank bar (docs/halumem.md, "Judge bank results").
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

Encode = Callable[[list[str]], np.ndarray]  # unit vectors, one row per text (core.embed.Embedder.encode)


def version_ranks(returned: Sequence[str], target: str, originals: Sequence[str], encode: Encode, similarity: float) -> dict[str, int | None]:
    """``rank_new`` and ``rank_old`` of one searched update point (module docstring)."""
    if not returned:
        return {"rank_new": None, "rank_old": None}
    items = np.asarray(encode(list(returned)))
    to_new = items @ np.asarray(encode([target]))[0]
    to_old = (items @ np.asarray(encode(list(originals))).T).max(axis=1) if originals else np.full(len(returned), -1.0)
    new = [i + 1 for i in range(len(returned)) if to_new[i] >= similarity and to_new[i] > to_old[i]]
    old = [i + 1 for i in range(len(returned)) if to_old[i] >= similarity and to_old[i] >= to_new[i]]
    return {"rank_new": new[0] if new else None, "rank_old": old[0] if old else None}


def new_above_old(row: dict[str, Any]) -> bool:
    return row["rank_new"] is not None and (row["rank_old"] is None or row["rank_new"] < row["rank_old"])
