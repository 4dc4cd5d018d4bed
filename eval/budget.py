"""Evidence recall at an equal context budget: each system's ranked list cut where its returned text
reaches N tokens, and the recall-against-tokens figure.

Why: recall@10 compares ten of one system's items with ten of another's, and an item may be a five-word
memory or a whole session. Cutting every list at the same number of tokens (eval/tokens.py) compares the
systems at the same amount of context. The cut keeps the system's own order and keeps an item only if the
tokens of it and of every item before it fit in the budget (an item that would cross the budget is left
out, and so is everything after it); a first item larger than the budget leaves nothing.

Rows are prediction rows: ``evidence`` (gold turn ids), ``retrieved`` (items with ``text`` and
``source_turn_ids``), ``retrieved_tokens`` where the run recorded them (counted from the stored text when
not: published runs made before tokens were recorded) and ``sample_id`` (the conversation: the cluster);
or retrieval-only rows (``retrievals.jsonl``), which keep each item's ``retrieved_ids`` and ``retrieved_tokens``
but no text: a row of a run made before tokens were recorded has none to count (``row_item_tokens`` None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eval.intervals import bootstrap_ci
from eval.metrics import evidence_recall
from eval.tokens import count_tokens


def items_within_budget(item_tokens: Sequence[int], budget: int) -> int:
    """How many leading items fit in ``budget`` tokens (the cut described in the module docstring)."""
    running = np.cumsum(np.asarray(item_tokens, dtype=int))
    return int(np.searchsorted(running, budget, side="right"))


def row_item_tokens(row: Mapping[str, Any]) -> list[int] | None:
    """Tokens of each returned item: as recorded, else counted from the stored text; None for a row that holds
    neither (a retrieval-only row of a run made before tokens were recorded)."""
    recorded = row.get("retrieved_tokens")
    if recorded is not None:
        return [int(t) for t in recorded]
    if row.get("retrieved") is None:
        return None
    return count_tokens([str(item.get("text", "")) for item in row.get("retrieved") or []])


def row_returned_tokens(row: Mapping[str, Any]) -> int | None:
    """Tokens of everything the search returned (None for a row that stored neither tokens nor returned items)."""
    if row.get("returned_tokens") is not None:
        return int(row["returned_tokens"])
    tokens = row_item_tokens(row)
    return None if tokens is None else int(sum(tokens))


def _item_turn_ids(row: Mapping[str, Any]) -> list[list[str]]:
    """Each returned item's source turn ids, in the system's order (prediction rows or retrieval-only rows)."""
    if row.get("retrieved_ids") is not None:
        return [list(ids) for ids in row["retrieved_ids"]]
    return [list(item.get("source_turn_ids") or []) for item in row.get("retrieved") or []]


def recall_at_budget(row: Mapping[str, Any], budget: int, item_tokens: Sequence[int] | None = None) -> float | None:
    """Evidence recall of the row's list cut at ``budget`` tokens; None for a question without evidence."""
    tokens = row_item_tokens(row) if item_tokens is None else item_tokens
    if tokens is None:
        raise ValueError(f"row {row.get('key')!r} records no tokens per item (retrieved_tokens): rerun it to cut its list at a budget")
    kept = _item_turn_ids(row)[: items_within_budget(tokens, budget)]
    return evidence_recall(row.get("evidence") or [], [tid for ids in kept for tid in ids])


def budget_recall(rows: Sequence[Mapping[str, Any]], budgets: Sequence[int], n_samples: int, seed: int) -> dict[str, Any]:
    """Budget (as text) -> evidence recall at that budget with both bootstrap intervals (clusters: conversations);
    empty when no budget is asked or some row records no tokens per item (nothing to cut by)."""
    if not budgets:
        return {}
    tokens = [row_item_tokens(r) for r in rows]
    if any(t is None for t in tokens):
        return {}
    clusters = [r.get("sample_id") for r in rows]
    return {str(b): bootstrap_ci([recall_at_budget(r, int(b), t) for r, t in zip(rows, tokens)], n_samples, seed, clusters=clusters)
            for b in budgets}  # fmt: skip


def plot_recall_vs_tokens(panels: Mapping[str, Mapping[str, Mapping[str, Any]]], path: Path, title: str) -> Path:
    """One panel per set of questions (runs are comparable only over the same questions), one line per run:
    evidence recall (x100) at each token budget, and a star for the whole list at its median size.
    ``panels``: panel title -> run label -> {"budgets": {budget: stat}, "median_tokens": float, "uncut": stat}.
    The intervals are in the tables; drawn here they would hide the lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 4 * len(panels)), squeeze=False, sharex=True)
    colours = plt.get_cmap("tab10").colors
    for ax, (panel, curves) in zip(axes[:, 0], panels.items()):
        for i, (label, curve) in enumerate(curves.items()):
            points = sorted((int(b), s) for b, s in curve["budgets"].items() if s.get("mean") is not None)
            if not points:
                continue
            colour, style = colours[i % len(colours)], ("-", "--", ":")[(i // len(colours)) % 3]
            ax.plot([b for b, _ in points], [100 * s["mean"] for _, s in points], style, marker="o", markersize=3, color=colour, label=label)
            uncut = curve.get("uncut") or {}
            if curve.get("median_tokens") is not None and uncut.get("mean") is not None:
                ax.plot([curve["median_tokens"]], [100 * uncut["mean"]], marker="*", markersize=11, color=colour, linestyle="none")
        ax.set_xscale("log")
        ax.set_title(panel, fontsize=9)
        ax.set_ylabel("evidence recall x100")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes[-1][0].set_xlabel("token budget: tokens of returned text kept (log scale)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
