"""Paired comparison of finished runs: each OTHER against BASE over the same items (questions, cases, update points).

    python -m scripts.compare_runs <BASE run folder> <OTHER run folder> [<OTHER> ...] [--out FILE.json] [--plot FILE.png] [--sessions N]

What is paired is the benchmark's (its ``comparison``, ``core.api.PairedComparable``, found from the class the base
run's metrics.json records; eval/benchmarks/<name>/compare.py): each of its quality fields for both runs and OTHER -
BASE with a paired bootstrap CI, beside the tokens each run's searches returned where the benchmark records them, and
each run's write cost per unit (calls, tokens, seconds; share of calls the response cache served). Retrieval-only runs
are compared by evidence recall. With --sessions N, for a benchmark whose items belong to sessions, over the first N
sessions only (a session-limited run against the same sessions of a whole-user run). No LLM call. Prints a markdown
table, and under it the mechanism counts of every run that records them (eval/mechanism_counts.py); with --out also
writes the JSON (and the tables beside it as .md); with --plot a forest plot of the differences (PNG).

Every difference carries two intervals: per item, and over clusters then items within them (the benchmark's
cluster unit; eval/intervals.py). Both are printed: the per-item one trusts items to be independent, which
questions about one conversation are not; over a single cluster the cluster interval holds for that one only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


from core.api import Comparison
from eval.compare import comparison_of, run_kind
from eval.mechanism_counts import mechanism_markdown, mechanisms


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return ""
    return f"{value * 100:+.1f}" if signed else f"{value * 100:.1f}"


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
    kind, how = run_kind(base), comparison_of(base)
    if sessions is not None and not how.cuts_sessions:
        raise ValueError(f"--sessions cuts runs to their first sessions; {base} measured {kind}, whose comparison has no sessions to cut: "
                         "leave --sessions out")
    rows = []
    for other in others:
        if run_kind(other) != kind:
            raise ValueError(f"{other} measured {run_kind(other)}, {base} measured {kind}: compare runs of one benchmark")
        rows.append({"run": str(other), "quality": how.quality(base, other, n_samples, seed, sessions),
                     "write_cost": how.write_cost(other, sessions)})  # fmt: skip
    return {"benchmark": kind, "base": str(base), "base_write_cost": how.write_cost(base, sessions), "comparisons": rows,
            "bootstrap": {"paired": True, "n_samples": n_samples, "seed": seed}, "sessions": sessions}


def markdown(result: dict[str, Any], how: Comparison | None = None) -> str:
    """One table: the base row, then each OTHER with its paired difference from the base (``how``: the benchmark's
    comparison; by default the base run's)."""
    how = how or comparison_of(Path(result["base"]))
    fields, unit = how.fields, how.cluster_unit
    quality = [head for _, name in fields for head in (name, f"{name} - base")]
    returned = ["tokens returned p50 / p95"] if how.returned_tokens else []
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
    per = how.cost_unit
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


def plot(result: dict[str, Any], path: Path, names: list[str] | None = None, how: Comparison | None = None) -> None:
    """A forest plot of each OTHER minus base with its paired 95% CI, in points: overall and per category where the
    benchmark's comparison says so (``per_category_axis``), else each of its quality fields. Why a picture: with three
    or four rows and five groups, which differences clear zero is read faster from intervals than from a table of brackets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    how = how or comparison_of(Path(result["base"]))
    per_category = how.per_category_axis is not None
    labels = _category_labels(Path(result["base"])) if per_category else {}
    rows = result["comparisons"]
    names = names or [str(Path(row["run"]).parent.name + "/" + Path(row["run"]).name) for row in rows]
    if per_category:
        first = rows[0]["quality"] if rows else {"correct": {}, "per_category": {}}
        groups = [("overall", lambda q: q["correct"], first["correct"].get("n"))]
        groups += [(labels.get(c, f"category {c}"), lambda q, c=c: q["per_category"].get(c, {}), stat.get("n"))
                   for c, stat in first["per_category"].items()]  # fmt: skip
    else:
        groups = [(name, lambda q, f=field: q[f], None) for field, name in how.fields]
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
    ax.set_xlabel(f"{how.per_category_axis or 'rate'}: other minus base, points (paired bootstrap 95% CI)")
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
    parser.add_argument("--sessions", type=int, default=None, help="compare over the first N sessions only (benchmarks whose items belong to sessions)")
    args = parser.parse_args(argv)
    result = compare(args.base, args.others, args.samples, args.seed, args.sessions)
    table = markdown(result)
    counts = {str(run): found for run in (args.base, *args.others) if (found := mechanisms(run)) is not None}
    if counts:  # which mechanism did the work (no section for runs that record none)
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
