"""LoCoMo (Maharana et al. 2024) as a package; this commit only moves the files (the split follows)."""

from eval.benchmarks.locomo.benchmark import (
    CONVENTIONS,
    TABLE_SOURCES,
    LoCoMoBenchmark,
    LoCoMoFormatError,
    SliceSpec,
    audited_keys,
    gold_slices,
    headline_table,
    load_locomo,
    locomo_table,
    normalise_evidence,
    paired_judgements,
    run_gold_slices,
    slice_episodes,
    slice_label,
    table_audited_keys,
)

__all__ = [
    "CONVENTIONS", "TABLE_SOURCES", "LoCoMoBenchmark", "LoCoMoFormatError", "SliceSpec", "audited_keys", "gold_slices",
    "headline_table", "load_locomo", "locomo_table", "normalise_evidence", "paired_judgements", "run_gold_slices",
    "slice_episodes", "slice_label", "table_audited_keys",
]
