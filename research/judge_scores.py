"""How far apart MOSAIC's NLI judgement scores lie, read from a run's committed LLM response cache.

    python -m research.judge_scores <archive.jsonl.gz> [--threshold <conflict.threshold>] [--out results/bench/x.json]

The save-time conflict check scores each check by p(false) from the label token's log-probabilities
and calls it a conflict above ``conflict.threshold``. Whether a threshold can work at all depends on the
spread of those scores: this prints p(false) by the label the model wrote, for single-check answers
(one word) and batched answers (``n. label`` lines, ``conflict.batch``), so that a judgement
whose scores sit in one narrow band whatever it answers shows up as such. Answers are recognised by their
shape (a cache holds every purpose's responses and no prompts); scripts/cache_archive.py writes archives.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf


from core.atomic import write_text_atomic
from mosaic.conflict_judgement import NLI_LABELS, batch_label_distributions, label_distribution, label_of
from core.llm.cache_archive import archive_entries

MOSAIC_CONF = Path(__file__).resolve().parents[1] / "conf" / "system" / "mosaic.yaml"
BATCH_LINE = re.compile(r"^\d+\.\s*(\w+)\s*$")


def judged_checks(responses: list[dict[str, Any]]) -> dict[str, list[tuple[str, float]]]:
    """(written label, p(false)) for every single and every batched NLI check among ``responses``."""
    checks: dict[str, list[tuple[str, float]]] = {"single": [], "batched": []}
    for response in responses:
        text = str(response.get("text", "")).strip()
        matches = [BATCH_LINE.match(line.strip()) for line in text.splitlines()]
        written = [label_of(match.group(1)) if match else None for match in matches]
        if written and all(written):
            for label, dist in zip(written, batch_label_distributions(response.get("logprobs"), text, len(written))):
                if dist is not None:
                    checks["batched"].append((label, dist["false"]))
        elif text and " " not in text and label_of(text) == text.lower():
            checks["single"].append((text.lower(), label_distribution(response.get("logprobs"), text)["false"]))
    return checks


def summarise(checks: list[tuple[str, float]], threshold: float) -> dict[str, Any]:
    """Count, p(false) quantiles overall and per written label, and how many reach the threshold."""
    def stats(scores: list[float]) -> dict[str, Any]:
        if not scores:
            return {"n": 0}
        q = np.quantile(scores, [0.0, 0.25, 0.5, 0.75, 1.0])
        return {"n": len(scores), "min": round(float(q[0]), 3), "q25": round(float(q[1]), 3), "median": round(float(q[2]), 3),
                "q75": round(float(q[3]), 3), "max": round(float(q[4]), 3), "at_or_above_threshold": int(sum(s >= threshold for s in scores))}
    return {"all": stats([s for _, s in checks]), **{label: stats([s for lab, s in checks if lab == label]) for label in NLI_LABELS}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--threshold", type=float, help="default: conflict.threshold in conf/system/mosaic.yaml")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.threshold is None:
        args.threshold = float(OmegaConf.load(MOSAIC_CONF).conflict.threshold)
    checks = judged_checks([response for _, response in archive_entries(args.archive)])
    report = {"archive": str(args.archive), "threshold": args.threshold, **{kind: summarise(rows, args.threshold) for kind, rows in checks.items()}}
    for kind in ("single", "batched"):
        print(f"{kind}: " + "; ".join(f"{label} {s}" for label, s in report[kind].items()))
    if args.out:
        write_text_atomic(args.out, json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
