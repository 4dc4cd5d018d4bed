"""Paired comparison of finished runs: each OTHER against BASE over the same questions or cases.

    python -m scripts.compare_runs <BASE run folder> <OTHER run folder> [<OTHER> ...] [--out FILE.json] [--plot FILE.png] [--sessions N]

LoCoMo runs: judge accuracy and token F1 of both, and OTHER - BASE with a paired bootstrap CI,
overall and per category, beside the tokens each run's searches returned (median / p95). Retrieval-only runs
(LoCoMo or HaluMem): evidence recall@10 and, for LoCoMo, recall at the tables' fixed token budget, the same way. Conflict-suite runs: detection and false alarms, the same way. Both:
the write cost per turn (calls, tokens, seconds; share of calls the response cache served). HaluMem runs:
QA and update correct/hallucination/omission, paired by question and update point; with --sessions N over
the first N sessions only (a session-limited run against the same sessions of a whole-user run). No LLM
call. Prints a markdown table, and under it the mechanism counts of every MOSAIC run (eval/mechanism_counts.py);
with --out also writes the JSON (and the tables beside it as .md); with --plot a forest plot of the differences (PNG).

Every difference carries two intervals: per item (questions, cases, update points), and over clusters then items
within them (LoCoMo conversations, HaluMem users, conflict-suite contexts; eval/intervals.py). Both are printed:
the per-item one trusts items to be independent, which questions about one conversation are not; over a single
conversation or user the cluster interval holds for that one only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


from eval.compare import compare_conflict, compare_halumem, compare_locomo, compare_retrieval, halumem_write_cost, run_kind, write_cost
from eval.mechanism_counts import mechanism_markdown, mechanisms


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return ""
    return f"{value * 100:+.1f}" if signed else f"{value * 100:.1f}"


# what a benchmark's cluster is, as the table names it
CLUSTER_UNITS = {"locomo": "conversation", "halumem": "user", "conflict": "context", "locomo_retrieval": "conversation", "halumem_retrieval": "user"}


def _diff(stat: dict[str, Any], unit: str = "cluster") -> str:
    """``+5.0 [+1.0, +9.0]; by conversation (10): [-2.0, +12.0]``: the per-item interval, then the cluster one."""
    if stat.get("mean") is None:
        return ""
    ci = f" [{_pct(stat['ci_low'], True)}, {_pct(stat['ci_high'], True)}]" if stat.get("ci_low") is not None else ""
    if stat.get("cluster_ci_low") is not None:
        ci += f"; by {unit} ({stat['n_clusters']}): [{_pct(stat['cluster_ci_low'], True)}, {_pct(stat['cluster_ci_high'], True)}]"
    return f"{_pct(stat['mean'], True)}{ci}"


def _tokens(summary: dict[str, Any] | None) -> str:
    """Tokens returned per search as ``median / p95``."""
    if not summary or summary.get("median") is None:
        return ""
    return f"{summary['median']:.0f} / {summary['p95']:.0f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def compare(base: Path, others: list[Path], n_samples: int = 2000, seed: int = 0, sessions: int | None = None) -> dict[str, Any]:
    """Every OTHER against BASE: the quality comparison for their benchmark and each run's write cost."""
    kind = run_kind(base)
    if sessions is not None and kind != "halumem":
        raise ValueError(f"--sessions cuts HaluMem runs to their first sessions; {base} measured {kind}: leave --sessions out")
    rows = []
    for other in others:
        if run_kind(other) != kind:
            raise ValueError(f"{other} measured {run_kind(other)}, {base} measured {kind}: compare runs of one benchmark")
        rows.append({"run": str(other), "quality": _quality(kind, base, other, n_samples, seed, sessions),
                     "write_cost": _write_cost(kind, other, sessions)})  # fmt: skip
    return {"benchmark": kind, "base": str(base), "base_write_cost": _write_cost(kind, base, sessions), "comparisons": rows,
            "bootstrap": {"paired": True, "n_samples": n_samples, "seed": seed}, "sessions": sessions}


def _quality(kind: str, base: Path, other: Path, n_samples: int, seed: int, sessions: int | None) -> dict[str, Any]:
    if kind == "locomo":
        return compare_locomo(base, other, n_samples, seed)
    if kind == "halumem":
        return compare_halumem(base, other, n_samples, seed, sessions)
    if kind.endswith("_retrieval"):
        return compare_retrieval(base, other, n_samples, seed)
    return compare_conflict(base, other, n_samples, seed)


def _write_cost(kind: str, run: Path, sessions: int | None) -> dict[str, Any]:
    return halumem_write_cost(run, sessions) if kind.startswith("halumem") else write_cost(run)


# Per benchmark: the table's two quality fields, named as the column heads show them.
_FIELDS = {"locomo": (("correct", "judge"), ("f1", "F1")),
           "conflict": (("detected", "detection"), ("false_alarm", "false alarms")),
           "halumem": (("qa_correct", "QA correct"), ("qa_hallucination", "QA hallucination"), ("update_correct", "update correct"),
                       ("link_right", "update linked right"), ("false_alarm", "false alarms")),
           "locomo_retrieval": (("recall", "evidence recall@10 (turn, cat. 1-4)"), ("budget", "evidence recall @budget tokens (turn)")),
           "halumem_retrieval": (("recall", "QA evidence recall@10 (session)"),)}


def markdown(result: dict[str, Any]) -> str:
    """One table: the base row, then each OTHER with its paired difference from the base."""
    kind = result["benchmark"]
    fields = _FIELDS.get(kind, _FIELDS["conflict"])
    unit = CLUSTER_UNITS.get(kind, "cluster")
    quality = [head for _, name in fields for head in (name, f"{name} - base")]
    returned = ["tokens returned p50 / p95"] if kind in ("locomo", "locomo_retrieval", "halumem_retrieval") else []
    head = ["run", *quality, *returned, "n", "calls/turn", "tokens/turn", "s/turn", "cached calls"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cost(c: dict[str, Any]) -> list[str]:
        return [_num(c["calls_per_turn"]), _num(c.get("tokens_per_turn"), 0), _num(c.get("seconds_per_turn"), 1), _pct(c.get("cached_call_share"))]

    first = result["comparisons"][0]["quality"] if result["comparisons"] else None
    if first:
        base_cells = [cell for field, _ in fields for cell in (_pct(first[field]["base"]), "")]
        base_tokens = [_tokens(first.get("returned_tokens", {}).get("base"))] if returned else []
        lines.append("| " + " | ".join([f"base: {result['base']}", *base_cells, *base_tokens, str(first["n_shared"]),
                                         *cost(result["base_write_cost"])]) + " |")  # fmt: skip
    for row in result["comparisons"]:
        q = row["quality"]
        cells = [cell for field, _ in fields for cell in (_pct(q[field]["other"]), _diff(q[field], unit))]
        tokens = [_tokens(q.get("returned_tokens", {}).get("other"))] if returned else []
        lines.append("| " + " | ".join([row["run"], *cells, *tokens, str(q["n_shared"]), *cost(row["write_cost"])]) + " |")
    per = "probe (tokens are not recorded per probe)" if kind == "conflict" else "ingested turn"
    lines.append("")
    scope = f" Sessions 0-{result['sessions'] - 1} only." if result.get("sessions") else ""
    lines.append(f"Differences are OTHER - base in points with two paired bootstrap 95% CIs over the shared items: per item, then "
                 f"'by {unit} (k)': {unit}s resampled, then items within them (k {unit}s; with one it holds for that {unit} only). "
                 f"Cost per {per}.{scope}")
    if returned:
        lines.append("Tokens returned: the text of everything a search returned, per question (eval/tokens.py).")
    if first and first.get("budget_tokens"):
        lines.append(f"Budget: each list cut where its returned text reaches {first['budget_tokens']} tokens (conf/report.yaml table_token_budget).")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path, names: list[str] | None = None) -> None:
    """A forest plot of each OTHER minus base with its paired 95% CI, in points: judge accuracy overall and per
    category (LoCoMo) or detection and false alarms (conflict suite). Why a picture: with three or four rows and
    five groups, which differences clear zero is read faster from intervals than from a table of brackets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    locomo = result["benchmark"] == "locomo"
    labels = _category_labels(Path(result["base"])) if locomo else {}
    rows = result["comparisons"]
    names = names or [str(Path(row["run"]).parent.name + "/" + Path(row["run"]).name) for row in rows]
    if locomo:
        first = rows[0]["quality"] if rows else {"correct": {}, "per_category": {}}
        groups = [("overall", lambda q: q["correct"], first["correct"].get("n"))]
        groups += [(labels.get(c, f"category {c}"), lambda q, c=c: q["per_category"].get(c, {}), stat.get("n"))
                   for c, stat in first["per_category"].items()]  # fmt: skip
    else:
        groups = [(name, lambda q, f=field: q[f], None) for field, name in _FIELDS.get(result["benchmark"], _FIELDS["conflict"])]
    fig, ax = plt.subplots(figsize=(7, 1.4 + 0.3 * len(groups) * max(len(rows), 1)))
    height = 0.8 / max(len(rows), 1)
    for i, (row, name) in enumerate(zip(rows, names)):
        ys, means, lows, highs = [], [], [], []
        for g, (_, pick, _) in enumerate(groups):
            stat = pick(row["quality"])
            if stat.get("mean") is None:
                continue
            ys.append(len(groups) - 1 - g + 0.4 - height * (i + 0.5))
            means.append(100 * stat["mean"])
            lows.append(100 * (stat["mean"] - stat["ci_low"]))
            highs.append(100 * (stat["ci_high"] - stat["mean"]))
        ax.errorbar(means, ys, xerr=[lows, highs], fmt="o", capsize=3, label=name)
    ax.axvline(0, color="grey", linewidth=1)
    ax.set_yticks([len(groups) - 1 - g for g in range(len(groups))])
    ax.set_yticklabels([f"{label}" + (f" (n = {n})" if n else "") for label, _, n in groups])
    ax.set_xlabel(f"{'judge accuracy' if locomo else 'rate'}: other minus base, points (paired bootstrap 95% CI)")
    ax.set_title(f"base: {result['base']}", fontsize=8)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _category_labels(run: Path) -> dict[str, str]:
    """The run's category names (its metrics.json), e.g. {"1": "multi-hop"}; {} when it has none."""
    try:
        return dict(json.loads((run / "metrics.json").read_text()).get("category_labels") or {})
    except (OSError, json.JSONDecodeError):
        return {}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("others", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here (and the table as .md beside it)")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=None, help="also draw the differences with their CIs to this PNG")
    parser.add_argument("--sessions", type=int, default=None, help="HaluMem: compare over the first N sessions only")
    args = parser.parse_args(argv)
    result = compare(args.base, args.others, args.samples, args.seed, args.sessions)
    table = markdown(result)
    counts = {str(run): found for run in (args.base, *args.others) if (found := mechanisms(run)) is not None}
    if counts:  # MOSAIC runs: which mechanism did the work (no section for runs that record none)
        result["mechanisms"] = counts
        scope = "" if args.sessions is None else f" (each run's whole-run counts: not cut to the first {args.sessions} sessions)"
        result["mechanisms_scope"] = "whole run"
        table += f"\n\nMechanism counts{scope}:\n\n" + mechanism_markdown(counts)
    print(table)
    if args.plot:
        plot(result, args.plot)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(table + "\n")
    return result


if __name__ == "__main__":
    main()
