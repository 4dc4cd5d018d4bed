"""Paired differences of a retrieval-only run to its base row, for its metrics.json: every retrieval metric (recall@k,
any-hit@k, NDCG) overall and per group (a benchmark's categories or question types), each with the per-question
interval and the one over clusters then questions within them, paired within the resampled clusters
(``eval.compare.paired_difference``). What a benchmark's rows hold, its levels and its clusters are the benchmark's
(``eval/benchmarks/<name>/retrieval_paired.py``, asked through ``core.api.RetrievalRecomputable``).

Why: a run cannot know its base while it runs (the base is another run, conf/report.yaml ``retrieval_base_row``), so
the differences are computed afterwards from both runs' stored ranked ids, with no LLM, and written beside the run's
own metrics (``scripts.add_fields``, eval/added_fields.py); the tables compute the same cells from the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval.compare import paired_difference

SECTION = "retrieval_paired_to_base"  # metrics.json key
Scored = dict[str, tuple[Any, dict[str, float]]]  # question key -> (group, metric -> value)


def paired_differences(base: Scored, other: Scored, groups: Sequence[Any], names: Sequence[str], clusters: dict[str, str],
                       n_samples: int, seed: int, overall: Callable[[Any], bool]) -> dict[str, Any]:
    """``overall`` (questions whose group ``overall`` keeps) and per group: metric -> paired difference (other - base)."""

    def cell(pick: Callable[[Any], bool]) -> dict[str, Any]:
        keys = set(base) & set(other)
        chosen = [k for k in keys if pick(base[k][0])]
        return {name: paired_difference({k: base[k][1][name] for k in chosen}, {k: other[k][1][name] for k in chosen}, n_samples, seed, clusters)
                for name in names}  # fmt: skip

    return {"overall": cell(overall), "per_group": {str(g): cell(lambda c, g=g: c == g) for g in groups}}


def base_record(base_dir: Path) -> str:
    """How the base run is named in the section: its path under results/published/runs when it lies there."""
    parts = Path(base_dir).resolve().parts
    return "/".join(parts[-4:])


def recorded_settings(run_dir: Path) -> tuple[dict[str, Any], int, int, list[int]]:
    """What a finished retrieval run was measured with, as it recorded it (so a recomputation repeats it): its
    benchmark block (config.yaml), bootstrap seed and samples, and the ks of its metrics.json."""
    import json

    import yaml

    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    bench = config["benchmark"]
    return bench, bench.get("seed", config.get("seed", 0)), int(bench["bootstrap_samples"]), list(metrics["retrieval"]["ks"])
