"""The conflict run loop (eval.benchmarks.conflict.benchmark): snapshots or re-ingest, seeding, slices, resume after a
failed write, and a suite edited during the run."""

from __future__ import annotations

import json

import pytest

from eval.benchmarks.conflict import ConflictBenchmark
from tests.unit.eval.benchmarks.conflict.test_conflict_suite import MINI, _event, _report


class ScriptedMemory:
    """A MemorySystem that flags any probe mentioning '2,300' against turn c:0; counts ingests."""

    name = "scripted"

    def __init__(self, snapshots: bool) -> None:
        self.held: dict[str, list[str]] = {}
        self.ingests = 0
        if snapshots:
            self.snapshot = lambda ns: list(self.held[ns])
            self.restore = lambda ns, state: self.held.__setitem__(ns, list(state))

    def reset(self, namespace):
        self.held[namespace] = []

    def add(self, namespace, turns, session_time=None):
        if len(turns) > 1:
            self.ingests += 1
        assert len(self.held[namespace]) in (0, len(MINI["contexts"]["c"])), "memory must hold exactly the context"
        self.held[namespace] += [t.turn_id for t in turns]
        flagged = [_event(["c:0"], "flag")] if "2,300" in turns[0].text else []
        return _report(flagged=flagged, calls=1)

    def search(self, namespace, query, k):
        return []


class _Embedder:
    dim = 3

    def encode(self, texts):
        import numpy as np

        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)


@pytest.mark.parametrize("snapshots", [True, False])
def test_benchmark_run_restores_or_reingests_and_resumes(tmp_path, snapshots):
    from eval.context import RunContext
    from tests.hydra_config import conf_judge

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    bench = ConflictBenchmark(suite=str(path), bootstrap_samples=50)
    ctx = RunContext(run_dir=tmp_path / "run", llm=None, judge=conf_judge(None), workers=1, embedder=_Embedder(), answerer=None)
    system = ScriptedMemory(snapshots)
    metrics = bench.run(system, ctx)
    assert system.ingests == (1 if snapshots else 3)
    assert metrics["detection_rate"]["mean"] == 0.5 and metrics["false_alarm_rate"]["mean"] == 0.0
    assert metrics["snapshot_restore"] is snapshots and metrics["n_cases"] == 3
    rows = [json.loads(line) for line in (tmp_path / "run" / "cases.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["n1", "l1", "ok1"] and rows[0]["reason"] == "because"
    again = ScriptedMemory(snapshots)
    assert bench.run(again, ctx)["detection_rate"]["mean"] == 0.5 and again.ingests == 0  # resumed: nothing redone


def test_seedable_systems_get_their_context_through_seed(tmp_path):
    from eval.context import RunContext
    from tests.hydra_config import conf_judge

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    system = ScriptedMemory(snapshots=True)
    seeded: list[int] = []

    def seed(namespace, turns, session_time=None):
        seeded.append(len(turns))
        system.held[namespace] += [t.turn_id for t in turns]
        return _report(calls=1)

    system.seed = seed
    ctx = RunContext(run_dir=tmp_path / "run", llm=None, judge=conf_judge(None), workers=1, embedder=_Embedder(), answerer=None)
    metrics = ConflictBenchmark(suite=str(path), bootstrap_samples=50).run(system, ctx)
    assert seeded == [len(MINI["contexts"]["c"])] and system.ingests == 0  # context via seed, probes via add
    assert metrics["context_written_with"].startswith("seed") and metrics["detection_rate"]["mean"] == 0.5
    untrusted = ConflictBenchmark(suite=str(path), bootstrap_samples=50, trusted_context=False)
    ctx2 = RunContext(run_dir=tmp_path / "run2", llm=None, judge=conf_judge(None), workers=1, embedder=_Embedder(), answerer=None)
    assert untrusted.run(system, ctx2)["context_written_with"] == "add" and system.ingests == 1


def test_cases_per_group_keeps_every_group_in_view():
    bench = ConflictBenchmark(suite="data/conflicts/hypertension.json", cases_per_group=2)
    picked = bench.selected_cases()
    groups = [c.type if c.conflict else "ok" for c in picked]
    assert sorted(groups) == sorted(["numeric", "semantic", "logical", "ok"] * 2)
    assert len(ConflictBenchmark(suite="data/conflicts/hypertension.json", cases_per_group=2, limit_cases=3).selected_cases()) == 3


class FlakyMemory(ScriptedMemory):
    """ScriptedMemory whose write of probe ``n1`` reports a failed LLM call while ``outage`` is on."""

    def __init__(self, outage: bool) -> None:
        super().__init__(snapshots=True)
        self.outage = outage
        self.probes: list[str] = []

    def add(self, namespace, turns, session_time=None):
        report = super().add(namespace, turns, session_time)
        if len(turns) == 1:
            self.probes.append(turns[0].turn_id)
            if self.outage and turns[0].turn_id == "probe:n1":
                report.flagged, report.failures = [], 1
        return report


def test_a_probe_whose_write_failed_is_counted_and_retried_on_resume(tmp_path):
    """A failed row was final; only overwrite=true redid it."""
    from eval.context import RunContext
    from tests.hydra_config import conf_judge
    from eval.rows import read_rows

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    bench = ConflictBenchmark(suite=str(path), bootstrap_samples=50)
    ctx = RunContext(run_dir=tmp_path / "run", llm=None, judge=conf_judge(None), workers=1, embedder=_Embedder(), answerer=None)
    metrics = bench.run(FlakyMemory(outage=True), ctx)
    assert metrics["failures"] == {"rows": 1, "ingest_turns": 0} and metrics["detection_rate"]["mean"] == 0.0
    healthy = FlakyMemory(outage=False)
    again = bench.run(healthy, ctx)
    assert healthy.probes == ["probe:n1"]  # only the failed row is redone
    assert again["failures"] == {"rows": 0, "ingest_turns": 0} and again["detection_rate"]["mean"] == 0.5
    assert [r["failures"] for r in read_rows(tmp_path / "run" / "cases.jsonl", "id")] == [0, 0, 0]


def test_a_suite_edited_after_the_run_started_is_refused_before_any_row(tmp_path):
    """The folder named by the old content got rows computed from the new content."""
    from eval.context import RunContext
    from tests.hydra_config import conf_judge
    from eval.provenance import InputChangedError, read_hashed

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    bench = ConflictBenchmark(suite=str(path), bootstrap_samples=50)
    started = {str(path.resolve()): read_hashed(path)[1]}  # what the run folder is named for
    edited = json.loads(path.read_text())
    edited["cases"][0]["probe"]["text"] = "Actually the figure is 9,999."
    path.write_text(json.dumps(edited))
    ctx = RunContext(run_dir=tmp_path / "run", llm=None, judge=conf_judge(None), workers=1, embedder=_Embedder(), answerer=None, inputs=started)
    with pytest.raises(InputChangedError, match=rf"{path} changed"):
        bench.run(ScriptedMemory(snapshots=True), ctx)
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").glob("*.jsonl"))
