"""Audited gold: errata loading and matching on (conversation position, qa index), both gold columns,
tables rebuilt from a finished run's rows, and the pinned download. Dev conversations only (conv-26, conv-30)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eval.benchmarks import locomo as locomo_module
from eval.benchmarks.locomo import LoCoMoBenchmark, audited_keys, load_locomo, run_gold_slices
from eval.record import RunMetrics
from eval.benchmarks.locomo.audit import AuditFormatError, load_errata, score_changing_positions
from tests.conftest import REPO
from tests.script_loader import load_script
from tests.unit.eval.benchmarks.locomo.test_locomo import make_ctx, make_system, scripted_llm, tiny_locomo, write

MIRROR = Path(os.environ.get("LOCOMO_MIRROR", "/nonexistent"))
AUDIT_DIR = next((d for d in (REPO / "data" / "locomo-audit", MIRROR / "locomo-audit") if (d / "errors.json").is_file()), None)
LOCOMO_FILE = next((p for p in (REPO / "data" / "locomo10.json", MIRROR / "locomo10.json") if p.is_file()), None)


def write_errata(tmp_path: Path) -> Path:
    """conv-a (position 0): q1 evidence-only, q2 wrong gold; conv-b (position 1): q0 wrong gold.

    The question texts are deliberately not the dataset's: matching must use the indices alone.
    """
    entries = [
        {"question_id": "locomo_0_qa1", "question": "unrelated text", "error_type": "WRONG_CITATION"},
        {"question_id": "locomo_0_qa2", "question": "Where did Carla move?", "error_type": "TEMPORAL_ERROR"},
        {"question_id": "locomo_1_qa0", "question": "What is the name of Ann's dog?", "error_type": "HALLUCINATION"},
    ]
    return write(tmp_path, entries, "errors.json")


def test_errata_match_on_indices_not_text(tmp_path):
    errata = load_errata(write_errata(tmp_path))
    assert score_changing_positions(errata) == {(0, 2), (1, 0)}  # the citation-only entry changes no score
    predictions = [{"key": f"{sid}:q{i}", "sample_id": sid, "qa_index": i} for sid in ("conv-a", "conv-b") for i in range(3)]
    assert audited_keys(predictions, {"conv-a": 0, "conv-b": 1}, tmp_path / "errors.json") == {"conv-a:q2", "conv-b:q0"}
    # the same sample ids at other positions match other questions: position, not id or text, decides
    assert audited_keys(predictions, {"conv-a": 1, "conv-b": 0}, tmp_path / "errors.json") == {"conv-a:q0", "conv-b:q2"}


def test_bad_errata_files_name_the_fix(tmp_path):
    with pytest.raises(AuditFormatError, match=r"python -m scripts\.download_data"):
        load_errata(tmp_path / "missing.json")
    with pytest.raises(AuditFormatError, match=r"entry \[0\]: needs question_id"):
        load_errata(write(tmp_path, [{"question_id": "q7", "error_type": "HALLUCINATION"}], "bad.json"))


def test_run_reports_both_gold_columns_and_the_headline_choice(tmp_path):
    data, errata = write(tmp_path, tiny_locomo()), write_errata(tmp_path)
    metrics = {}
    for gold in ("original", "audited_excluded"):
        bench = LoCoMoBenchmark(path=str(data), top_k=1, bootstrap_samples=100, gold=gold, audit_errata=str(errata))
        metrics[gold] = bench.run(make_system(tmp_path), make_ctx(tmp_path / gold, scripted_llm()))
    judged = {json.loads(line)["key"]: json.loads(line)["correct"] for line in (tmp_path / "original" / "judgements.jsonl").read_text().splitlines()}
    slices = metrics["original"]["gold_slices"]
    assert slices["original"]["n_excluded"] == 0 and slices["original"]["overall"]["n"] == 7
    assert slices["audited_excluded"]["n_excluded"] == 2 and slices["audited_excluded"]["overall"]["n"] == 5
    kept = [k for k in judged if k not in ("conv-a:q2", "conv-b:q0")]
    assert slices["audited_excluded"]["overall"]["judge"]["mean"] == pytest.approx(sum(judged[k] for k in kept) / 5)
    assert slices["audited_excluded"]["per_category"]["2"]["n"] == 0 if "2" in slices["audited_excluded"]["per_category"] else True
    assert metrics["original"]["overall"]["n"] == 7 and metrics["audited_excluded"]["overall"]["n"] == 5  # headline follows `gold`
    assert metrics["audited_excluded"]["gold_slices"] == slices and metrics["original"]["judge_prompt"] == "default"
    table = LoCoMoBenchmark.make_table([metrics["original"]])
    assert table.loc["rag", "audited: excluded n"] == 2 and table.loc["rag", "overall J audited (score-changing gold errors excluded)"]
    with pytest.raises(ValueError, match="benchmark.gold"):
        LoCoMoBenchmark(path=str(data), gold="fixed")
    with pytest.raises(FileNotFoundError, match=r"python -m scripts\.download_data"):
        LoCoMoBenchmark(path=str(data), gold="audited_excluded", audit_errata=str(tmp_path / "none.json")).run(make_system(tmp_path), make_ctx(tmp_path / "x", scripted_llm()))


def test_tables_rebuild_gold_columns_from_a_finished_runs_rows(tmp_path, monkeypatch):
    data, errata = write(tmp_path, tiny_locomo()), write_errata(tmp_path)
    bench = LoCoMoBenchmark(path=str(data), top_k=1, bootstrap_samples=100, audit_errata=str(errata))
    metrics = bench.run(make_system(tmp_path), make_ctx(tmp_path / "run", scripted_llm()))
    published = {k: v for k, v in metrics.items() if k not in ("gold_slices", "gold", "judge_prompt")}  # as older runs wrote it
    published["_path"] = str(tmp_path / "run" / "metrics.json")
    monkeypatch.setitem(locomo_module.TABLE_SOURCES, "locomo", data)
    monkeypatch.setitem(locomo_module.TABLE_SOURCES, "audit_errata", errata)
    assert run_gold_slices(published) is None  # a record as written: the table reads what it holds
    upgraded = RunMetrics.of(published).upgraded().as_table_input()  # the one upgrader asks LoCoMo for what its rows give
    rebuilt = run_gold_slices(upgraded)
    assert rebuilt["audited_excluded"]["overall"] == metrics["gold_slices"]["audited_excluded"]["overall"]
    row = LoCoMoBenchmark.make_table([upgraded]).iloc[0]
    assert row["audited: excluded n"] == 2 and row["headline gold"] == "original" and "(default)" in row["judge (prompt)"]


@pytest.mark.skipif(AUDIT_DIR is None, reason="locomo-audit files absent (python -m scripts.download_data)")
def test_real_errata_counts():
    errata = load_errata(AUDIT_DIR / "errors.json")
    assert len(errata) == 156 and len(score_changing_positions(errata)) == 99
    assert sum(e.error_type == "WRONG_CITATION" for e in errata) == 57


@pytest.mark.skipif(AUDIT_DIR is None or LOCOMO_FILE is None, reason="locomo10.json or locomo-audit files absent")
def test_real_errata_indices_point_at_the_audited_questions_on_dev_conversations():
    """For conv-26 and conv-30 only (dev): the audit's (position, index) names the question it quotes."""
    convs = load_locomo(LOCOMO_FILE)
    assert [c.sample_id for c in convs[:2]] == ["conv-26", "conv-30"]
    entries = json.loads((AUDIT_DIR / "errors.json").read_text())
    dev = [e for e in entries if e["question_id"].startswith(("locomo_0_", "locomo_1_"))]
    assert dev
    for entry in dev:
        position, index = (int(x) for x in entry["question_id"][len("locomo_") :].split("_qa"))
        assert convs[position].questions[index].question == entry["question"], entry["question_id"]


def test_download_fetches_the_pinned_audit_files(tmp_path):
    download = load_script("download_data")
    assert all(len(digest) == 64 for _, digest in download.AUDIT_FILES.values())
    assert download.AUDIT_COMMIT in download.AUDIT_URL
    bad = tmp_path / "bad" / "locomo-audit"
    bad.mkdir(parents=True)
    for name in download.AUDIT_FILES:
        (bad / name).write_text("{}")
    with pytest.raises(download.DownloadError, match="does not match"):
        download.obtain_audit(tmp_path / "out", tmp_path / "bad")
    with pytest.raises(download.DownloadError, match="pass --mirror DIR"):
        download.obtain(tmp_path / "x.json", None, url="http://127.0.0.1:9/errors.json", timeout_s=5, filename="errors.json", sha256="0" * 64)
    if AUDIT_DIR is not None:
        done = download.obtain_audit(tmp_path / "out", AUDIT_DIR.parent)
        assert set(done) == set(download.AUDIT_FILES) and set(done.values()) == {"mirror"}
        assert set(download.obtain_audit(tmp_path / "out", None).values()) == {"present"}  # idempotent, no fetch
