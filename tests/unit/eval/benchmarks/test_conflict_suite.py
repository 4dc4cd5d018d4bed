"""Suite format validation, detection scoring on hand-made AddReports, metrics and Table 3."""

from __future__ import annotations

import copy
import json

import pytest

from eval.benchmarks.conflict import ConflictBenchmark, aggregate, conflict_table, score_case
from eval.benchmarks.conflict_suite import SuiteFormatError, load_suite, parse_suite
from core.api import AddReport, ConflictEvent, LLMUsage, StoredItem
from tests.conftest import REPO


MINI = {
    "name": "mini",
    "split": "dev",
    "description": "hand-made",
    "contexts": {"c": [
        {"speaker": "a", "text": "Rent is 1,650 dollars a month."},
        {"speaker": "a", "text": "Large purchases need both partners' agreement."},
        {"speaker": "b", "text": "Daniel bought a sofa."},
    ]},
    "cases": [
        {"id": "n1", "context": "c", "probe": {"speaker": "a", "text": "Rent is 2,300 dollars a month."},
         "conflict": True, "type": "numeric", "explicit": True, "conflicts_with": [0]},
        {"id": "l1", "context": "c", "probe": {"speaker": "b", "text": "Daniel bought a 2,000 dollar TV alone, as allowed."},
         "conflict": True, "type": "logical", "explicit": False, "conflicts_with": [1, 2]},
        {"id": "ok1", "context": "c", "probe": {"speaker": "a", "text": "The dog likes walks."},
         "conflict": False, "type": None, "explicit": None, "conflicts_with": []},
    ],
}  # fmt: skip


def _event(old_ids: list[str], verdict: str = "update") -> ConflictEvent:
    return ConflictEvent(new_text="new", old_text="old", verdict=verdict, reason="because", old_source_turn_ids=old_ids)  # type: ignore[arg-type]


def _report(updated=(), rejected=(), flagged=(), calls: int = 2) -> AddReport:
    return AddReport(stored=[StoredItem("m", "new")], updated=list(updated), rejected=list(rejected), flagged=list(flagged),
                     usage=LLMUsage(calls=calls, by_purpose={"conflict": {"calls": calls}}), n_turns=1)  # fmt: skip


def test_shipped_suites_are_valid_and_shaped_as_the_issue_asks():
    hyp = load_suite(REPO / "data/conflicts/hypertension.json")
    conflicting = [c for c in hyp.cases if c.conflict]
    assert len(conflicting) == 50
    assert {t: sum(c.type == t for c in conflicting) for t in ("numeric", "semantic", "logical")} == {"numeric": 14, "semantic": 13, "logical": 23}
    assert hyp.split == "eval"
    assert sum(not c.conflict for c in hyp.cases) >= 30
    for dev_file in ("household_finance.json", "workplace_policy.json"):
        dev = load_suite(REPO / "data/conflicts" / dev_file)
        assert dev.split == "dev"
        assert sum(c.conflict for c in dev.cases) >= 20 and sum(not c.conflict for c in dev.cases) >= 15
        assert {c.type for c in dev.cases if c.conflict} == {"numeric", "semantic", "logical"}
        dev_probes = [c.probe_text for c in dev.cases]
        assert len(set(dev_probes)) == len(dev_probes)
    probes = [c.probe_text for c in hyp.cases]
    assert len(set(probes)) == len(probes)


@pytest.mark.parametrize(
    ("mutate", "case_id", "field"),
    [
        (lambda d: d["cases"][0].pop("type"), "n1", "type"),
        (lambda d: d["cases"][0].update(conflicts_with=[7]), "n1", "conflicts_with"),
        (lambda d: d["cases"][1].update(conflicts_with=[]), "l1", "conflicts_with"),
        (lambda d: d["cases"][2].update(type="numeric"), "ok1", "type"),
        (lambda d: d["cases"][2].update(explicit=True), "ok1", "explicit"),
        (lambda d: d["cases"][1].update(explicit="yes"), "l1", "explicit"),
        (lambda d: d["cases"][0].update(context="nope"), "n1", "context"),
        (lambda d: d["cases"][0]["probe"].pop("text"), "n1", "probe.text"),
        (lambda d: d["cases"][2].update(id="n1"), "n1", "id"),
        (lambda d: d["cases"][0].update(conflict="true"), "n1", "conflict"),
    ],
)
def test_malformed_suite_names_case_and_field(mutate, case_id, field):
    data = copy.deepcopy(MINI)
    mutate(data)
    with pytest.raises(SuiteFormatError) as err:
        parse_suite(data, "mini.json")
    message = str(err.value)
    assert f"case {case_id!r}" in message and f"field {field!r}" in message and "mini.json" in message


@pytest.mark.parametrize("split", [None, "test", "EVAL", ""])
def test_split_field_is_required_and_dev_or_eval(split):
    data = copy.deepcopy(MINI)
    data.pop("split") if split is None else data.update(split=split)
    with pytest.raises(SuiteFormatError, match="field 'split'"):
        parse_suite(data, "mini.json")
    assert parse_suite({**data, "split": "eval"}).split == "eval"


def test_logical_conflict_may_rest_on_one_context_turn():
    """One held fact plus the probe and general knowledge (an allergy and a drug of that class) is honest."""
    data = copy.deepcopy(MINI)
    data["cases"][1]["conflicts_with"] = [1]
    case = parse_suite(data).cases[1]
    assert case.type == "logical" and case.conflicts_with == (1,)


def test_bad_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(SuiteFormatError, match="broken.json"):
        load_suite(bad)
    (tmp_path / "nocases.json").write_text(json.dumps({**MINI, "cases": []}))
    with pytest.raises(SuiteFormatError, match="'cases'"):
        load_suite(tmp_path / "nocases.json")


def test_strict_and_lenient_detection_from_add_reports():
    suite = parse_suite(MINI)
    n1, l1, ok1 = suite.cases
    assert suite.context_turns("c")[1].turn_id == "c:1"
    hit = score_case(suite, n1, _report(updated=[_event(["c:0"])]))
    assert hit["detected_strict"] and hit["detected_lenient"] and hit["verdicts"] == ["update"] and hit["reason"] == "because"
    wrong = score_case(suite, n1, _report(flagged=[_event(["c:2"], "flag")]))
    assert not wrong["detected_strict"] and wrong["detected_lenient"] and wrong["miss_reason"] == "wrong memory"
    logical = score_case(suite, l1, _report(rejected=[_event(["c:2"], "reject")]))  # either gold turn counts
    assert logical["detected_strict"]
    silent = score_case(suite, l1, _report(), radius=[0])
    assert not silent["detected_lenient"] and silent["miss_reason"] == "out of neighbour radius"
    alarm = score_case(suite, ok1, _report(flagged=[_event(["c:0"], "flag")]))
    assert alarm["detected_lenient"] and alarm["miss_reason"] is None


def test_miss_reasons_for_numbers_gate_and_verdict():
    suite = parse_suite(MINI)
    n1 = suite.cases[0]
    assert score_case(suite, n1, _report(), radius=[0, 1])["miss_reason"] == "plausible numbers"  # 2,300 vs 1,650: within x2
    far = parse_suite({**MINI, "cases": [{**MINI["cases"][0], "probe": {"speaker": "a", "text": "Rent is 9,000 dollars a month."}}]})
    assert score_case(far, far.cases[0], _report(), radius=[0])["miss_reason"] == "LLM verdict"
    queued = AddReport(queued=["x"], n_turns=1)
    assert score_case(suite, n1, queued, radius=[0])["miss_reason"] == "queued by gate"


def test_aggregate_rates_precision_and_f1_by_hand():
    suite = parse_suite(MINI)
    n1, l1, ok1 = suite.cases
    rows = [
        score_case(suite, n1, _report(updated=[_event(["c:0"])], calls=3)),  # TP
        score_case(suite, l1, _report(calls=1)),  # FN
        score_case(suite, ok1, _report(flagged=[_event(["c:1"], "flag")], calls=2)),  # FP
    ]
    m = aggregate(rows, samples=200, seed=0)
    assert m["detection_rate"]["mean"] == 0.5 and m["by_type"]["numeric"]["mean"] == 1.0 and m["by_type"]["logical"]["mean"] == 0.0
    assert m["by_type"]["semantic"]["n"] == 0 and m["explicit"]["mean"] == 1.0 and m["implicit"]["mean"] == 0.0
    assert m["false_alarm_rate"]["mean"] == 1.0
    assert m["precision"]["mean"] == 0.5 and m["f1"]["mean"] == pytest.approx(0.5)
    assert m["llm_calls_per_case"]["mean"] == 2.0 and m["n_cases"] == 3
    for key in ("detection_rate", "false_alarm_rate", "precision", "f1", "llm_calls_per_case"):
        assert m[key]["ci_low"] <= m[key]["mean"] <= m[key]["ci_high"]
    assert m["misses"]["logical"]["LLM verdict"] == 1
    assert m["verdict_counts"] == {"update": 1, "reject": 0, "flag": 1}


def test_table_has_paper_column_and_zero_by_construction():
    suite = parse_suite(MINI)
    rows = [score_case(suite, c, _report()) for c in suite.cases]
    silent = {**aggregate(rows, samples=50), "conflict_signal": False, "metadata": {"system": "rag"}, "suite": "mini"}
    loud_rows = [score_case(suite, suite.cases[0], _report(updated=[_event(["c:0"])]))] + rows[1:]
    loud = {**aggregate(loud_rows, samples=50), "conflict_signal": None, "metadata": {"system": "mosaic"}, "suite": "mini"}
    sliced = {**loud, "metadata": {"system": "mem0"}, "slice": {"cases_per_group": 3, "limit_cases": None}}
    table = ConflictBenchmark.make_table([silent, loud, sliced])
    assert table.loc["mosaic", "suite"] == "mini" and table.loc["mem0", "suite"] == "mini (slice: first 3 per group)"
    assert list(table.columns[:8]) == ["suite", "overall", "numeric", "semantic", "logical", "explicit", "implicit", "false alarms"]
    assert (table.loc["rag", ["overall", "numeric", "false alarms"]] == "0 by construction").all()
    assert table.loc["mosaic", "numeric"].startswith("100.0")
    paper = [i for i in table.index if i.startswith("paper: MOSAIC 66 overall")]
    assert len(paper) == 1 and table.loc[paper[0], "implicit"] == "72.7" and table.loc[paper[0], "false alarms"] == "not reported"
    assert conflict_table([]).shape[0] == 1  # only the paper row


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
