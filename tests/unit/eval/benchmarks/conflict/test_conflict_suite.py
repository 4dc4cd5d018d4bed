"""The conflict suite's file format (eval.benchmarks.conflict.suite): the shipped suites are valid, a malformed suite
names its case and field, and a bad file names itself. MINI and the AddReport builders serve the other tests here."""

from __future__ import annotations

import copy
import json

import pytest

from eval.benchmarks.conflict.suite import SuiteFormatError, load_suite, parse_suite
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


def test_shipped_suites_have_their_promised_sizes_types_and_splits():
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
