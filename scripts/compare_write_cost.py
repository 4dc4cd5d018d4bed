"""Issue 19's before/after: MOSAIC's default write path against a cheaper variant, side by side.

    python scripts/compare_write_cost.py [--variant ablation=fused_conflict] [--slices quickstart household workplace]
                                         [--out results/bench/write_cost_compare.json] [-- extra run.py overrides]

For each slice it runs ``run.py`` twice, once with the default MOSAIC and once with the variant's
overrides (each run is resumable and a finished one is only read back, so rerunning this script after
a kill repeats nothing), then compares the two run folders question by question or case by case
(scripts/compare_runs.py): calls, tokens and seconds per checked turn, and the quality numbers with
paired bootstrap CIs. Slices: ``quickstart`` (LoCoMo conv-26, 3 sessions), ``household`` and
``workplace`` (the conflict dev suites), ``conv26`` (the whole dev conversation, ~2 h per row here).
Never a measurement conversation or suite: this is for choosing a write path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.compare_runs import compare, markdown  # noqa: E402
from scripts.run_rows import ROOT, relative_to_checkout, run_folder  # noqa: E402

SLICES: dict[str, list[str]] = {
    "quickstart": ["experiment=locomo", "system=mosaic"],
    "household": ["experiment=conflict", "system=mosaic", "conflict.suite=data/conflicts/household_finance.json"],
    "workplace": ["experiment=conflict", "system=mosaic", "conflict.suite=data/conflicts/workplace_policy.json"],
    "conv26": ["experiment=locomo_conv26", "system=mosaic"],
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", nargs="+", default=["ablation=fused_conflict"], help="run.py overrides of the cheaper write path")
    parser.add_argument("--slices", nargs="+", default=["quickstart", "household", "workplace"], choices=sorted(SLICES))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "write_cost_compare.json")
    parser.add_argument("extra", nargs="*", help="overrides for every run (after --), e.g. llm=vllm")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"variant": args.variant, "extra_overrides": args.extra, "slices": {}}
    tables = []
    for name in args.slices:
        base = run_folder([*SLICES[name], *args.extra])
        other = run_folder([*SLICES[name], *args.variant, *args.extra])
        result = compare(relative_to_checkout(base), [relative_to_checkout(other)])
        report["slices"][name] = result
        tables.append(f"### {name}\n\n{markdown(result)}")
    text = "\n\n".join(tables)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(f"# Write cost: default MOSAIC vs {' '.join(args.variant)}\n\n{text}\n")
    return report


if __name__ == "__main__":
    main()
