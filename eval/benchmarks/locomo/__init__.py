"""LoCoMo (Maharana et al. 2024), one module per mechanism.

``data``: the file's records, loader, evidence-id fixes, category conventions and the run's slice;
``stages``: what one ingest, predict or score item does and writes; ``metrics``: pure functions on rows
(per-question metrics, aggregation with CIs, gold slices); ``benchmark``: ``LoCoMoBenchmark``, the run loop;
``table``: Table 1 and its views from metrics.json files; ``audit``: the locomo-audit gold errata;
``judge_calibration``: a judge's false/true-accept rates on the audit's wrong-answer bank
(scripts/calibrate_judge.py); ``judge_agreement``: a second judge on a finished run (scripts/rejudge.py).

The judge itself (``eval.judge``) stays outside: the runner builds it from conf/judge for every benchmark
(``RunContext.judge``), and HaluMem asks its rubrics through that judge's client.
"""

# conf/benchmark/locomo.yaml and every published metrics.json name ``eval.benchmarks.locomo.LoCoMoBenchmark``
# (the target is part of each run's config hash, hence its folder name); the other names are the ones
# scripts, research tools and tests import from the package.
from eval.benchmarks.locomo.audit import audited_keys
from eval.benchmarks.locomo.benchmark import LoCoMoBenchmark
from eval.benchmarks.locomo.data import CONVENTIONS, LoCoMoFormatError, SliceSpec, load_locomo, normalise_evidence, slice_episodes
from eval.benchmarks.locomo.metrics import gold_slices, paired_judgements
from eval.benchmarks.locomo.table import TABLE_SOURCES, headline_table, locomo_table, run_gold_slices, slice_label, table_audited_keys

__all__ = [
    "CONVENTIONS", "TABLE_SOURCES", "LoCoMoBenchmark", "LoCoMoFormatError", "SliceSpec", "audited_keys", "gold_slices",
    "headline_table", "load_locomo", "locomo_table", "normalise_evidence", "paired_judgements", "run_gold_slices",
    "slice_episodes", "slice_label", "table_audited_keys",
]
