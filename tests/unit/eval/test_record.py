"""The run record (eval.record): every published metrics.json and provenance.json loads through the typed model
and dumps back to the same bytes, so their hashes stay; older records are read as the current version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import DictConfig, open_dict

from baselines.rag import RagMemory
from core.api import HarnessError
from eval.record import RECORD_VERSION, RecordedMetrics, RunMetrics, load_metrics, load_provenance, write_record
from eval.runner import kept_system_metrics, run, run_dir_for
from tests.fakes import SchemaFakeLLM
from tests.hydra_config import compose_config
from tests.unit.eval.test_experiments_smoke import _on_fakes, _slice

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


# -- the runner owns the system's counters and closes the system -------------------------------------------------

EVENTS: list[str] = []  # what the runner did to the parts it built, in order


class MeteredRag(RagMemory):
    """The rag baseline with counters of its own (as MOSAIC's mechanism counts) and a close the runner must call."""

    def search(self, namespace, query, k):  # type: ignore[no-untyped-def]
        self.searches = getattr(self, "searches", 0) + 1
        return super().search(namespace, query, k)

    def metrics(self) -> dict[str, int]:
        return {"searches": getattr(self, "searches", 0)}

    def close(self) -> None:
        EVENTS.append("system closed")


class ClosingLLM(SchemaFakeLLM):
    def close(self) -> None:
        EVENTS.append("llm closed")


def _metered_locomo_run(tmp_path: Path) -> tuple[DictConfig, list[str]]:
    overrides = ["experiment=locomo", *_slice("locomo", tmp_path)]
    cfg = _on_fakes(compose_config(overrides), tmp_path)
    with open_dict(cfg):
        cfg.system._target_ = f"{__name__}.MeteredRag"
        cfg.llm._target_ = f"{__name__}.ClosingLLM"
    return cfg, overrides


def test_the_runner_closes_the_system_before_the_llm_and_keeps_its_counters_across_a_judging_only_resume(tmp_path):
    cfg, overrides = _metered_locomo_run(tmp_path)
    EVENTS.clear()
    first = run(cfg, overrides)
    assert EVENTS == ["system closed", "llm closed"]  # closed by the runner, not left to garbage collection
    assert first["system_metrics"] == {"searches": 4}  # one search per question
    run_dir = run_dir_for(cfg)
    (run_dir / "metrics.json").unlink()
    (run_dir / "judgements.jsonl").unlink()  # killed while judging: every prediction is in, no judgement
    EVENTS.clear()
    resumed = run(cfg, overrides)
    assert EVENTS == ["system closed", "llm closed"]
    assert resumed["system_metrics"] == {"searches": 4}  # the predicting invocation's, not this idle system's zero
    invocations = load_provenance(run_dir / "provenance.json").invocations
    assert [(i.system_did_work, i.system_metrics) for i in invocations] == [(True, {"searches": 4}), (False, {"searches": 0})]
    assert load_metrics(run_dir / "metrics.json").system_metrics_scope.startswith("last invocation that ingested or predicted, of 2")


def test_the_runner_closes_the_system_when_the_benchmark_fails(tmp_path, monkeypatch):
    cfg, overrides = _metered_locomo_run(tmp_path)
    EVENTS.clear()
    monkeypatch.setattr(MeteredRag, "search", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        run(cfg, overrides)
    assert EVENTS == ["system closed", "llm closed"]


def test_kept_counters_come_from_the_last_invocation_that_used_the_system():
    earlier = [{"system_did_work": True, "system_metrics": {"n": 1}}, {"system_did_work": True, "system_metrics": {"n": 2}},
               {"system_did_work": False, "system_metrics": {"n": 0}}, {"system_metrics": {"n": 9}}]  # fmt: skip
    assert kept_system_metrics(earlier, {"n": 0}, did_work=False) == {"n": 2}  # unmarked (older) entries are unknown
    assert kept_system_metrics(earlier, {"n": 5}, did_work=True) == {"n": 5}
    assert kept_system_metrics([], {"n": 0}, did_work=False) == {"n": 0}


def test_a_record_names_its_classes_by_what_it_recorded_then_its_config_then_its_conf_name(tmp_path):
    """eval/'s shared modules ask these classes what they declare; an old record without the system's class path
    finds it in its config.yaml, and a class path that moved gives way to the conf group's current one."""
    from eval.benchmarks.locomo import LoCoMoBenchmark
    from eval.record import recorded_class

    recorded = RecordedMetrics.of({"metadata": {"system": "mine", "system_target": "baselines.rag.RagMemory"}})
    assert recorded.recorded_class("system") is RagMemory
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("system:\n  _target_: baselines.rag.RagMemory\n  name: mine\n")
    from_config = RecordedMetrics.of({"metadata": {"system": "mine"}, "_path": str(run / "metrics.json")})
    assert from_config.recorded_class("system") is RagMemory
    moved = RecordedMetrics.of({"metadata": {"benchmark": "locomo", "benchmark_target": "eval.gone.LoCoMoBenchmark"}})
    assert moved.recorded_class("benchmark") is LoCoMoBenchmark  # conf/benchmark/locomo.yaml
    assert RecordedMetrics.of({"metadata": {"system": "../conf/x"}}).recorded_class("system") is None
    assert recorded_class([None, "no.such.Class"]) is None


class AddsWhatRowsGive:
    @staticmethod
    def upgrade_record(data: dict, folder: Path | None, version: int) -> dict:
        return {**data, "rebuilt": {"from_version": version, "folder": str(folder)}}


def test_the_one_upgrader_lets_the_benchmark_add_what_an_old_record_lacks(tmp_path):
    """core.api.UpgradesRecords: called once, for a record below the current version only, with its folder."""
    meta = {"schema_version": 1, "git_sha": "abc", "benchmark": "mine", "benchmark_target": f"{__name__}.AddsWhatRowsGive"}
    old = RunMetrics.of({"metadata": meta, "_path": str(tmp_path / "metrics.json")}).upgraded()
    assert old.metadata.schema_version == RECORD_VERSION and getattr(old, "rebuilt") == {"from_version": 1, "folder": str(tmp_path)}
    current = RunMetrics.of({"metadata": {**meta, "schema_version": RECORD_VERSION}}).upgraded()
    assert not hasattr(current, "rebuilt")
