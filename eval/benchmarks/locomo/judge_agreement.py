"""A second judge on a finished LoCoMo run: its accuracy, and how far it agrees with the first.

Re-judging needs only the run's predictions.jsonl; the second judge's rows go to
``judgements2__<model>__<prompt>.jsonl`` in the run folder (resumable), and metrics.json gains a
``judge2`` section with Cohen's kappa and the 2x2 confusion table between the two judges.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sklearn.metrics import cohen_kappa_score
from tqdm import tqdm

from core.api import HarnessError
from core.atomic import write_json_atomic
from eval.benchmarks.locomo.judge_calibration import calibration_key
from eval.benchmarks.locomo.metrics import gold_slices, paired_judgements
from eval.benchmarks.locomo.stages import judged, judgement_row
from eval.benchmarks.locomo.table import table_audited_keys
from eval.context import JsonlRows
from eval.judge import AnswerJudge
from eval.rows import read_rows
from eval.runner import read_metrics

LABELS = ("CORRECT", "WRONG")


def judge_agreement(first: Sequence[str | None], second: Sequence[str | None]) -> dict[str, Any]:
    """Cohen's kappa and the confusion counts over items both judges labelled (failures are counted apart)."""
    if len(first) != len(second):
        raise ValueError(f"judge_agreement: {len(first)} first-judge labels but {len(second)} second-judge labels")
    pairs = [(a, b) for a, b in zip(first, second) if a in LABELS and b in LABELS]
    confusion = {f"judge {a} / judge2 {b}": sum(p == (a, b) for p in pairs) for a in LABELS for b in LABELS}
    with warnings.catch_warnings():  # one shared label only: sklearn warns and returns nan, reported as None below
        warnings.simplefilter("ignore")
        kappa = float(cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs], labels=list(LABELS))) if pairs else None
    return {
        "kappa": None if kappa is None or math.isnan(kappa) else kappa,  # undefined when both judges say one label only
        "agreement": sum(a == b for a, b in pairs) / len(pairs) if pairs else None,
        "confusion": confusion,
        "n_compared": len(pairs),
        "n_unlabelled": len(first) - len(pairs),
    }


class RejudgeError(HarnessError):
    """The folder cannot be re-judged (missing, unfinished, damaged); the message names it and the fix."""


def check_rejudgeable(run_dir: Path) -> dict[str, Any]:
    """The metrics of a finished LoCoMo run folder, or one RejudgeError naming what is missing or damaged: checked
    before any judge (and its server) is built."""
    if not run_dir.is_dir():
        raise RejudgeError(f"run_dir={run_dir}: no such folder; pass a finished LoCoMo run folder (run.py prints it)")
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.is_file() or not (run_dir / "predictions.jsonl").is_file():
        raise RejudgeError(f"{run_dir}: needs metrics.json and predictions.jsonl of a finished LoCoMo run (rerun its command to finish it)")
    return read_metrics(metrics_path)


def rejudge(run_dir: Path, judge: AnswerJudge, judge_model_id: str, n_samples: int = 1000, seed: int = 0, section_key: str = "judge2") -> dict[str, Any]:
    """Judge the run's predictions with ``judge``, write the rows, add ``section_key`` (``judge2``, or
    ``judge_calibrated`` for Table 1's calibrated column) to metrics.json; return it."""
    metrics_path = run_dir / "metrics.json"
    metrics = check_rejudgeable(run_dir)
    # the one tolerant reader: a damaged line (the runner recovered from it) is skipped with file and line named
    predictions = read_rows(run_dir / "predictions.jsonl")
    first = paired_judgements(predictions, read_rows(run_dir / "judgements.jsonl"), legacy=True)
    threshold = getattr(judge, "threshold", None)  # a calibrated judge's rows hold labels under this threshold only
    stem = calibration_key(judge_model_id, judge.prompt.name) + ("" if threshold is None else f"__t{threshold:g}")
    second_rows = JsonlRows(run_dir / f"judgements2__{stem}.jsonl")
    stale = [p for p in predictions if not judged(second_rows, p)]  # unjudged, failed, or of another answer than the one now held
    for p in tqdm(stale, desc=f"judge2 ({judge.prompt.name})", unit="q"):
        second_rows.replace(judgement_row(judge, p))
    second = {p["key"]: second_rows.get(p["key"]) or {} for p in predictions}
    slices = gold_slices(predictions, second, table_audited_keys(predictions), metrics.get("convention", "locomo"), n_samples, seed)
    section = {
        "judge_model_id": judge_model_id,
        "prompt": judge.prompt.name,
        "judge_class": type(judge).__name__,
        **({} if threshold is None else {"threshold": threshold}),
        "rows_file": f"judgements2__{stem}.jsonl",
        "overall": slices["original"]["overall"],
        "per_category": slices["original"]["per_category"],
        "gold_slices": slices,
        **judge_agreement([first.get(p["key"], {}).get("label") for p in predictions], [second[p["key"]].get("label") for p in predictions]),
    }
    metrics[section_key] = section
    write_json_atomic(metrics_path, metrics, indent=2, default=str)
    return section

