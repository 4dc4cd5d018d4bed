"""Fields a finished LoCoMo run's metrics.json lacks because it was made before they existed, recomputed from
its stored rows (no LLM) and added without changing any value it already holds.

Why: the cluster interval, the conversations counted, tokens returned per search and evidence recall at token
budgets all follow from predictions.jsonl and judgements.jsonl, so a published run need not be rerun to show
them. Every value the run was published with is recomputed too and must come out the same; a run where one
does not is left untouched (``AddedFields.mismatches`` says where; the merge is eval/added_fields.py's).
``python -m scripts.add_fields`` runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from core.atomic import write_json_atomic
from eval.added_fields import ADDED_RECORD, AddedFields, git_sha, merge_new
from eval.benchmarks.locomo.metrics import aggregate, gold_slices, paired_judgements
from eval.benchmarks.locomo.table import table_audited_keys
from eval.intervals import report_settings
from eval.rows import read_rows

def add_fields(run_dir: Path, write: bool = True) -> AddedFields:
    """Recompute one run's metrics from its rows and add what it lacks (``write``: save metrics.json)."""
    run_dir = Path(run_dir)
    report = AddedFields(run_dir)
    metrics_path = run_dir / "metrics.json"
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    if metrics.get("gold") == "audited_excluded":
        report.skipped = "headline over the audited questions: not recomputed here"
        return report
    if not (run_dir / "predictions.jsonl").is_file() or not (run_dir / "judgements.jsonl").is_file():
        report.skipped = "no predictions.jsonl / judgements.jsonl"
        return report
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    bench = config["benchmark"]
    seed, samples = bench.get("seed", config.get("seed", 0)), int(bench["bootstrap_samples"])
    # question order (as the run aggregated them, whatever order its workers wrote the rows in)
    predictions = sorted(read_rows(run_dir / "predictions.jsonl"), key=lambda p: (p["sample_id"], p["qa_index"]))
    judged = paired_judgements(predictions, read_rows(run_dir / "judgements.jsonl"), legacy=True)
    budgets = [int(b) for b in report_settings()["token_budgets"]]
    again = aggregate(predictions, judged, bench["convention"], samples, seed, budgets)
    recomputed = {key: again[key] for key in ("overall", "per_category", "conversations", "returned_tokens", "evidence_recall_at_budget")}
    if metrics.get("gold_slices"):
        slices = gold_slices(predictions, judged, table_audited_keys(predictions), bench["convention"], samples, seed)
        recomputed["gold_slices"] = {mode: cell for mode, cell in slices.items() if cell is not None and metrics["gold_slices"].get(mode)}
    updated = json.loads(json.dumps(metrics))
    merge_new(updated, recomputed, "", report.added, report.mismatches)
    if report.mismatches or not report.added:
        return report
    names = sorted({where.rsplit(".", 1)[-1] for where in report.added})  # the new keys, wherever they were added
    updated[ADDED_RECORD] = {"fields": names, "n_values": len(report.added), "command": "python -m scripts.add_fields", "git_sha": git_sha(),
                             "how": "recomputed from predictions.jsonl and judgements.jsonl, no LLM; every value the run "
                                    "already held recomputed identically and left as it was"}  # fmt: skip
    if write:
        write_json_atomic(metrics_path, updated, indent=2, default=str)
    return report
