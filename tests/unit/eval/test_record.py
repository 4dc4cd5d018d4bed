"""The run record (eval.record): every published metrics.json and provenance.json loads through the typed model
and dumps back to the same bytes, so their hashes stay; older records are read as the current version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.api import HarnessError
from eval.record import RECORD_VERSION, RecordedMetrics, RunMetrics, load_metrics, load_provenance, write_record

PUBLISHED = Path(__file__).resolve().parents[3] / "results" / "published"
METRICS = sorted(PUBLISHED.rglob("metrics.json"))
PROVENANCE = sorted(PUBLISHED.rglob("provenance.json"))


def test_there_are_published_records_to_check():
    assert len(METRICS) > 50 and len(PROVENANCE) > 50


@pytest.mark.parametrize("loader, paths", [(load_metrics, METRICS), (load_provenance, PROVENANCE)], ids=["metrics", "provenance"])
def test_every_published_record_loads_and_writes_back_byte_identical(loader, paths, tmp_path):
    for path in paths:
        record = loader(path)
        copy = tmp_path / path.name
        write_record(copy, record)
        assert copy.read_bytes() == path.read_bytes(), path


def test_every_published_metrics_record_upgrades_to_the_current_version():
    versions = set()
    for path in METRICS:
        record = load_metrics(path)
        versions.add(record.metadata.schema_version)
        upgraded = record.upgraded()
        assert upgraded.metadata.schema_version == RECORD_VERSION and upgraded.source == path
        assert upgraded.metadata.git_dirty is not None and upgraded.metadata.benchmark == record.metadata.benchmark
    assert 1 in versions  # the upgrader has old records to read


def test_a_version_1_record_is_upgraded_from_what_it_implies_and_nothing_more():
    old = RunMetrics.of({"metadata": {"schema_version": 1, "git_sha": "abc-dirty", "benchmark": "locomo"}, "score": 0.5})
    new = old.upgraded()
    assert new.metadata.schema_version == 2 and new.metadata.git_dirty is True
    assert new.metadata.git_sha_start is None and new.metadata.code_at_start is None  # not recorded: not invented
    assert new.score == 0.5  # a benchmark's own block passes through


def test_typed_keys_replace_the_conventions():
    record = RecordedMetrics.of({"_path": "/runs/x/metrics.json", "main_metric": None, "failures": {"rows": 2},
                                 "metadata": {"overrides": ["system.conflict.k=1", "llm=qwen"]}})  # fmt: skip
    assert record.failed_rows == 2 and record.failures.ingest_turns == 0
    assert record.has_main_metric and record.main_metric is None
    assert record.folder == Path("/runs/x") and record.system_overrides == ["conflict.k=1"]
    assert "_path" not in json.dumps(record.dump()) and "source" not in record.dump()  # where it was read from is never written
    assert not RecordedMetrics.of({"n_cases": 3}).has_main_metric


def test_a_record_of_the_wrong_type_fails_naming_the_key(tmp_path):
    with pytest.raises(HarnessError, match="failures.rows"):
        RecordedMetrics.of({"failures": {"rows": "many"}})
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"metadata": {"overrides": "not a list"}}))
    with pytest.raises(HarnessError, match=r"metrics.json: not a run record \(metadata.overrides"):
        load_metrics(path)


def test_the_runner_refuses_to_write_a_record_that_does_not_say_what_ran():
    with pytest.raises(HarnessError, match="config_hash"):
        RunMetrics.of({"metadata": {"benchmark": "b", "benchmark_target": "t", "system": "s", "ablation": "none"}}).check_complete()
