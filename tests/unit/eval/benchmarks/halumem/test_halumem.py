"""HaluMem: loader validation, every metric on hand-made judge outputs, judge failure handling,
and the benchmark's control flow (FakeLLM judge, a scripted memory system) end to end."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from eval.benchmarks.halumem.benchmark import HaluMemBenchmark
from eval.benchmarks.halumem.data import QUESTION_TYPES, HaluMemSchemaError, halumem_time_to_iso, load_halumem_hub, load_halumem_jsonl
from eval.benchmarks.halumem.metrics import by_memory_type, by_question_type, extraction_metrics, f1_score, label_metrics
from eval.context import RunContext
from eval.benchmarks.halumem.judge import (ACCURACY_SCHEMA, GOLD_FIELDS_SCHEMA, INTEGRITY_SCHEMA, QA_SCHEMA, UPDATE_CONTENT_SCHEMA,
                                           UPDATE_ORIGINAL_SCHEMA, HaluMemJudge)
from eval.tokens import count_tokens
from core.api import AddReport, Retrieved, StoredItem, Turn
from tests.conftest import REPO
from tests.fakes import FakeLLM, HashEmbedder
from tests.hydra_config import conf_judge

FIXTURES = REPO / "tests" / "fixtures" / "halumem"
TINY = FIXTURES / "halumem_tiny.jsonl"
USER1 = "a1b2c3d4-0000-4000-8000-000000000001"
USER2 = "a1b2c3d4-0000-4000-8000-000000000002"


# ----------------------------------------------------------------------------- loader
def test_fixture_loads_with_typed_fields():
    users = load_halumem_jsonl(TINY)
    assert [u.uuid for u in users] == [USER1, USER2]
    assert [u.name for u in users] == ["Martin Mark", "Lena Wu"]
    martin, lena = users
    update = martin.sessions[1].memory_points[0]
    assert update.is_update is True and update.is_searched_update
    assert martin.sessions[0].memory_points[0].is_update is False
    assert [p.is_interference for p in martin.sessions[0].memory_points] == [False, False, False, True]
    assert [s.is_generated_qa_session for s in lena.sessions] == [False, True, False]
    assert lena.sessions[1].title == "Pure_QA_Session" and lena.sessions[1].memory_points == ()
    question_types = {q.question_type for u in users for s in u.sessions for q in s.questions}
    assert question_types == set(QUESTION_TYPES)


def test_time_format_converts_to_iso_and_rejects_others():
    assert halumem_time_to_iso("Dec 15, 2025, 08:41:23") == "2025-12-15T08:41:23"
    with pytest.raises(HaluMemSchemaError, match="does not match"):
        halumem_time_to_iso("2025-12-15 08:41:23")


@pytest.mark.parametrize(
    ("file_name", "uuid", "field"),
    [
        ("malformed_is_update_bool.jsonl", USER1, "sessions[1].memory_points[0].is_update"),
        ("malformed_time_format.jsonl", USER2, "sessions[0].start_time"),
        ("malformed_question_type.jsonl", USER1, "sessions[0].questions[0].question_type"),
        ("malformed_persona_name.jsonl", USER1, "persona_info"),
        ("malformed_missing_importance.jsonl", USER2, "sessions[2].memory_points[1]"),
    ],
)
def test_malformed_line_names_user_and_field(file_name, uuid, field):
    with pytest.raises(HaluMemSchemaError) as err:
        load_halumem_jsonl(FIXTURES / file_name)
    message = str(err.value)
    assert f"user {uuid}" in message
    assert f"field {field}" in message
    assert file_name in message


def test_malformed_is_update_reports_the_bad_line_number():
    with pytest.raises(HaluMemSchemaError, match=r"malformed_is_update_bool.jsonl:2:"):
        load_halumem_jsonl(FIXTURES / "malformed_is_update_bool.jsonl")


def test_broken_json_line_names_line_and_uuid():
    with pytest.raises(HaluMemSchemaError, match=r"malformed_not_json.jsonl:2: user broken: not valid JSON"):
        load_halumem_jsonl(FIXTURES / "malformed_not_json.jsonl")


def test_missing_file_points_to_the_docs(tmp_path):
    with pytest.raises(FileNotFoundError, match="docs/halumem.md"):
        load_halumem_jsonl(tmp_path / "HaluMem-Medium.jsonl")


def test_hub_loading_without_datasets_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as if not installed
    with pytest.raises(ImportError, match="pip install datasets"):
        load_halumem_hub("Medium")
    with pytest.raises(ValueError, match="variant"):
        load_halumem_hub("Short")


# ----------------------------------------------------------------------------- metrics
def _integrity(score, importance, interference=False, memory_type="Persona Memory"):
    return {"score": score, "importance": importance, "is_interference": interference, "memory_type": memory_type}


INTEGRITY_ROWS = [
    _integrity(2, 1.0),
    _integrity(1, 0.5, memory_type="Event Memory"),
    _integrity(0, 0.2),
    _integrity(None, 0.3),  # judge failure: left out of the headline ("valid") ratio, no credit in "all"
    _integrity(2, 0.5, memory_type="Event Memory"),
    _integrity(0, 0.3, interference=True),  # resisted
    _integrity(2, 0.3, interference=True),  # the false memory was stored
    _integrity(None, 0.3, interference=True),
]
ACCURACY_ROWS = [
    {"score": 2, "in_gold_fields": True},
    {"score": 1, "in_gold_fields": True},
    {"score": 0, "in_gold_fields": False},
    {"score": None, "in_gold_fields": None},  # judge failure
    {"score": 2, "in_gold_fields": False},
]


def test_extraction_metrics_on_hand_made_judgements():
    """HaluMem's (valid) ratios as the headline, its (all) ratios beside them (evaluation.py aggregate_eval_results)."""
    m = extraction_metrics(INTEGRITY_ROWS, ACCURACY_ROWS, n_boot=200, seed=1)
    assert m["recall"]["mean"] == pytest.approx(2 / 4) and m["recall"]["all"] == pytest.approx(2 / 5)
    assert m["recall"]["n"] == 4 and m["recall"]["n_all"] == 5 and m["recall"]["failures"] == 1
    # 0.5*score*importance summed over gold points / their importance: (1.0 + 0.25 + 0 + 0.5) / 2.2 valid, / 2.5 all
    assert m["weighted_recall"]["mean"] == pytest.approx(1.75 / 2.2) and m["weighted_recall"]["all"] == pytest.approx(1.75 / 2.5)
    assert m["target_precision"]["mean"] == pytest.approx((1.0 + 0.5) / 2)
    assert m["accuracy"]["mean"] == pytest.approx((1.0 + 0.5 + 0 + 1.0) / 4) and m["accuracy"]["all"] == pytest.approx(2.5 / 5)
    # interference accuracy = share of interference points scored 0
    assert m["false_memory_resistance"]["mean"] == pytest.approx(1 / 2) and m["false_memory_resistance"]["all"] == pytest.approx(1 / 3)
    assert m["f1"]["mean"] == pytest.approx(2 * 0.75 * 0.5 / (0.75 + 0.5))
    assert m["f1"]["all"] == pytest.approx(2 * 0.75 * 0.4 / (0.75 + 0.4))  # HaluMem's memory_extraction_f1
    assert m["counts"] == {
        "gold_points": 5,
        "interference_points": 3,
        "stored_memories": 5,
        "target_memories": 2,
        "integrity_judge_failures": 2,
        "accuracy_judge_failures": 1,
        "gold_fields_judge_failures": 1,
    }
    for name in ("recall", "weighted_recall", "target_precision", "accuracy", "false_memory_resistance", "f1"):
        metric = m[name]
        assert metric["ci_low"] <= metric["mean"] <= metric["ci_high"], name


def test_extraction_metrics_ci_narrows_with_more_items():
    small = extraction_metrics(INTEGRITY_ROWS, ACCURACY_ROWS, n_boot=300)
    big = extraction_metrics(INTEGRITY_ROWS * 20, ACCURACY_ROWS * 20, n_boot=300)
    for name in ("recall", "weighted_recall", "f1"):
        assert big[name]["mean"] == pytest.approx(small[name]["mean"])
        assert big[name]["ci_high"] - big[name]["ci_low"] < small[name]["ci_high"] - small[name]["ci_low"], name


def test_extraction_metrics_with_nothing_to_score():
    m = extraction_metrics([], [], n_boot=50)
    assert m["recall"]["mean"] is None and m["f1"]["mean"] is None and m["weighted_recall"]["mean"] is None


def test_f1_edges():
    assert f1_score(0.0, 0.0) == 0.0
    assert f1_score(1.0, 1.0) == 1.0
    assert f1_score(None, 0.5) is None


def test_label_metrics_leave_failures_out_of_the_valid_share_and_count_them():
    rows = [{"label": x} for x in ("Correct", "Correct", "Hallucination", "Omission", None, "Other")]
    m = label_metrics(rows, ("Correct", "Hallucination", "Omission", "Other"), n_boot=100)
    assert m["correct"]["mean"] == pytest.approx(2 / 5) and m["correct"]["all"] == pytest.approx(2 / 6)
    assert m["hallucination"]["mean"] == pytest.approx(1 / 5)
    assert m["omission"]["mean"] == pytest.approx(1 / 5)
    assert m["other"]["mean"] == pytest.approx(1 / 5)
    assert m["judge_failures"] == 1 and m["n"] == 6 and m["n_valid"] == 5


def test_label_metrics_with_every_verdict_failed_report_no_share():
    """Nine failed QA verdicts used to read as 0.0 correct; now there is no valid share (like LoCoMo: null, n=0)."""
    m = label_metrics([{"label": None}] * 9, ("Correct", "Hallucination", "Omission"), n_boot=50)
    assert m["correct"]["mean"] is None and m["correct"]["n"] == 0 and m["correct"]["all"] == 0.0
    assert m["judge_failures"] == 9 and m["n_valid"] == 0


def test_breakdowns_by_question_type_and_memory_type():
    qa = [
        {"label": "Correct", "question_type": "Basic Fact Recall"},
        {"label": "Omission", "question_type": "Basic Fact Recall"},
        {"label": "Hallucination", "question_type": "Memory Boundary"},
    ]
    by_q = by_question_type(qa, ("Correct", "Hallucination", "Omission"), n_boot=50)
    assert set(by_q) == {"Basic Fact Recall", "Memory Boundary"}
    assert by_q["Basic Fact Recall"]["correct"]["mean"] == pytest.approx(0.5)
    assert by_q["Memory Boundary"]["hallucination"]["mean"] == pytest.approx(1.0)

    updates = [
        {"label": "Correct", "memory_type": "Persona Memory"},
        {"label": "Omission", "memory_type": "Persona Memory"},
        {"label": "Correct", "memory_type": "Relationship Memory"},
    ]
    by_m = by_memory_type(INTEGRITY_ROWS, updates, n_boot=50)
    persona = by_m["Persona Memory"]
    # gold persona points: scores 2, 0, None -> recall 1/2 over the valid ones
    assert persona["recall"]["mean"] == pytest.approx(1 / 2) and persona["recall"]["all"] == pytest.approx(1 / 3)
    assert persona["update_correct"]["mean"] == pytest.approx(0.5)
    # HaluMem's combined accuracy: (scored-2 integrity records, interference included, + Correct updates)
    # / (all integrity records + all update records) = (1 + 1 + 1) / (6 + 2)
    assert persona["combined"]["mean"] == pytest.approx(3 / 8)
    assert by_m["Event Memory"]["recall"]["mean"] == pytest.approx(0.5)
    assert by_m["Relationship Memory"]["update_correct"]["mean"] == pytest.approx(1.0)
    assert by_memory_type(None, updates, n_boot=50)["Persona Memory"]["recall"] is None


# ----------------------------------------------------------------------------- judge
def test_judge_parses_verdicts_and_meters_them_as_judge():
    def responder(messages, schema):
        props = schema["properties"]
        if "in_gold_fields" in props:
            return {"reason": "ok", "in_gold_fields": True}
        if "verdict" in props:
            return {"reason": "ok", "verdict": "partial"}
        if schema is ACCURACY_SCHEMA:
            return {"reason": "ok", "score": 1}
        if "score" in props:
            return {"reason": "ok", "score": "2"}  # numeric strings are accepted, as in HaluMem's prompts
        return {"reason": "ok", "label": "Omission"}

    llm = FakeLLM(responder)
    judge = HaluMemJudge(llm)
    assert judge.integrity(["Martin works at Huaxin."], "Martin works at Huaxin.").value == 2
    assert judge.accuracy("[t] user: hi", ["gold"], "candidate").value == 1
    assert judge.gold_fields(["gold"], "candidate").value is True
    assert judge.update(["m"], "target", ["orig"]).value == "Omission"  # partial: the second question is not asked
    assert judge.qa("q", "a", ["k"], "r").value == "Omission"
    assert [r["schema"] for r in llm.requests] == [INTEGRITY_SCHEMA, ACCURACY_SCHEMA, GOLD_FIELDS_SCHEMA, UPDATE_CONTENT_SCHEMA, QA_SCHEMA]
    assert {r["purpose"] for r in llm.requests} == {"judge"}
    assert llm.usage.by_purpose["judge"]["calls"] == 5


@pytest.mark.parametrize(
    ("content", "original_current", "label", "calls"),
    [("complete", False, "Correct", 2), ("complete", True, "Other", 2), ("partial", None, "Omission", 1),
     ("missing", None, "Omission", 1), ("wrong", None, "Hallucination", 1)],
)
def test_update_correct_needs_the_original_replaced_or_marked_outdated(content, original_current, label, calls):
    """HaluMem's Correct update also needs "the original memory is effectively replaced or marked as outdated":
    a complete new version beside a still-current original is not Correct (it used to be)."""
    def responder(messages, schema):
        if schema is UPDATE_CONTENT_SCHEMA:
            return {"reason": "", "verdict": content}
        return {"reason": "", "original_current": original_current}

    llm = FakeLLM(responder)
    verdict = HaluMemJudge(llm).update(["Lena lives in Munich.", "Lena lives in Berlin."], "Lena lives in Munich.", ["Lena lives in Berlin."])
    assert verdict.value == label and len(llm.requests) == calls
    if calls == 2:
        assert llm.requests[1]["schema"] is UPDATE_ORIGINAL_SCHEMA


def _questions_judge(llm):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[5] / "conf"), version_base=None):
        prompts = compose("halumem_judge/update_questions").halumem_judge
    return HaluMemJudge(llm, prompts)


@pytest.mark.parametrize(
    ("answers", "label", "asked"),
    [({"update_new": "yes", "update_old_current": "no"}, "Correct", ["update_new", "update_old_current"]),
     ({"update_new": "yes", "update_old_current": "yes"}, "Other", ["update_new", "update_old_current"]),
     ({"update_new": "no", "update_other_value": "yes"}, "Hallucination", ["update_new", "update_other_value"]),
     ({"update_new": "no", "update_other_value": "no"}, "Omission", ["update_new", "update_other_value"])],
)
def test_update_questions_structure_asks_yes_no_questions_and_routes_them_to_halumems_labels(answers, label, asked):
    """conf/halumem_judge/update_questions.yaml: the same four labels from two reason-free yes/no questions."""
    from eval.benchmarks.halumem.judge import YES_NO_SCHEMA

    systems = {}

    def responder(messages, schema):
        name = next(n for n in answers if systems[n] == messages[0]["content"])
        return {"answer": answers[name]}

    llm = FakeLLM(responder)
    judge = _questions_judge(llm)
    systems.update({n: judge.prompts[n].system for n in ("update_new", "update_old_current", "update_other_value")})
    verdict = judge.update(["Lena lives in Munich."], "Lena moved from Berlin to Munich.", ["Lena lives in Berlin."])
    assert verdict.value == label and [r["schema"] for r in llm.requests] == [YES_NO_SCHEMA, YES_NO_SCHEMA]
    assert [next(n for n, text in systems.items() if text == r["messages"][0]["content"]) for r in llm.requests] == asked
    assert "Lena lives in Berlin." in llm.requests[0]["messages"][1]["content"]


def test_update_structure_is_named_by_the_prompts_file_and_a_wrong_one_is_refused():
    from eval.benchmarks.halumem.judge import load_prompts, update_structure

    assert HaluMemJudge(FakeLLM(lambda m, s: {})).update_structure == "verdict"  # conf/halumem_judge/default.yaml
    raw = {name: {"system": "s", "user": "u"} for name in ("integrity", "accuracy", "gold_fields", "update_content", "update_original", "qa")}
    with pytest.raises(ValueError, match=r"benchmark.judge_prompts.update_structure: 'vote'"):
        update_structure({**raw, "update_structure": "vote"})
    with pytest.raises(ValueError, match="benchmark.judge_prompts.update_new"):
        load_prompts({**raw, "update_structure": "questions"})
    assert _questions_judge(FakeLLM(lambda m, s: {})).update_structure == "questions"


def test_accuracy_and_gold_fields_are_two_questions_so_one_cannot_mirror_the_other():
    """HaluMem's accuracy prompt asks for the score and is_included_in_golden_memories in one reply; a small judge
    copied one into the other. Each is now its own call, and the field question carries no dialogue."""
    llm = FakeLLM(lambda messages, schema: {"reason": "", "score": 0} if schema is ACCURACY_SCHEMA else {"reason": "", "in_gold_fields": True})
    judge = HaluMemJudge(llm)
    assert judge.accuracy("[t] user: I adopted a cat.", ["Lena has a cat."], "Lena has a dog.").value == 0
    assert judge.gold_fields(["Lena has a cat."], "Lena has a dog.").value is True
    accuracy_prompt, fields_prompt = (r["messages"][1]["content"] for r in llm.requests)
    assert "I adopted a cat." in accuracy_prompt and "I adopted a cat." not in fields_prompt


def test_judge_prompts_come_from_conf_and_a_missing_one_is_named():
    from hydra import compose, initialize_config_dir

    from eval.benchmarks.halumem.judge import load_prompts

    prompts = load_prompts()
    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[5] / "conf"), version_base=None):
        composed = compose("config", overrides=["benchmark=halumem"]).benchmark.judge_prompts
    assert load_prompts(composed) == prompts  # the code default (None) reads what conf composes
    assert "replaced" in prompts["update_original"].system.lower() or "outdated" in prompts["update_original"].system.lower()
    with pytest.raises(ValueError, match="benchmark.judge_prompts.qa"):
        load_prompts({name: {"system": "s", "user": "u"} for name in ("integrity", "accuracy", "gold_fields", "update_content", "update_original")})


def test_judge_schema_breaking_output_is_a_counted_failure_after_retries():
    llm = FakeLLM(lambda messages, schema: "not json at all")
    judge = HaluMemJudge(llm, attempts=3)
    verdict = judge.qa("q", "a", [], "r")
    assert verdict.value is None and verdict.failure and verdict.failure.startswith("schema")
    assert len(llm.requests) == 3


@pytest.mark.parametrize(
    "payload",
    [{"reason": "", "label": "Maybe"}, {"reason": "", "score": 7}, {"reason": "", "in_gold_fields": "yes"}, {"reason": "", "verdict": "kind of"}],
)
def test_judge_out_of_range_verdicts_are_failures(payload):
    judge = HaluMemJudge(FakeLLM(lambda messages, schema: payload))
    if "label" in payload:
        assert judge.qa("q", "a", [], "r").failure
    elif "score" in payload:
        assert judge.integrity(["m"], "p").failure and judge.accuracy("d", [], "c").failure
    elif "verdict" in payload:
        assert judge.update(["m"], "t", []).failure
    else:
        assert judge.gold_fields([], "c").failure


# ----------------------------------------------------------------------------- control flow
class KeywordMemory:
    """Scripted memory: keeps each user utterance; search ranks by shared words. Inspectable."""

    name = "keyword"

    def __init__(self) -> None:
        self.items: dict[str, list[StoredItem]] = {}
        self.adds: list[tuple[str, list[Turn], str | None]] = []
        self.searches: list[tuple[str, int]] = []

    def reset(self, namespace: str) -> None:
        self.items[namespace] = []

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        self.adds.append((namespace, turns, session_time))
        new = [StoredItem(f"m{len(self.items[namespace]) + i}", t.text, [t.turn_id]) for i, t in enumerate(x for x in turns if x.speaker != "assistant")]
        self.items[namespace] += new
        return AddReport(stored=new, n_turns=len(turns))

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        self.searches.append((query, k))
        words = set(query.lower().split())
        ranked = sorted(self.items[namespace], key=lambda item: -len(words & set(item.text.lower().split())))
        return [Retrieved(item.text, 1.0, None, item.source_turn_ids, item.memory_id) for item in ranked[:k]]

    def stored_items(self, namespace: str) -> list[StoredItem]:
        return list(self.items[namespace])


class BlindMemory(KeywordMemory):
    """Same, but cannot list what it holds (Zep-like): no ``stored_items``."""

    name = "blind"
    stored_items = None  # type: ignore[assignment]


class EchoAnswerer:
    """Stand-in for the shared answerer: answers with the top memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str | None]] = []

    def answer(self, question: str, retrieved: list[Retrieved], question_time: str | None = None) -> dict[str, Any]:
        self.calls.append((question, len(retrieved), question_time))
        return {"text": retrieved[0].text if retrieved else "I don't know", "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0}


def _fixed_judge(messages, schema):
    props = schema["properties"]
    if "in_gold_fields" in props:
        return {"reason": "", "in_gold_fields": True}
    if "verdict" in props:
        return {"reason": "", "verdict": "complete"}
    if "original_current" in props:
        return {"reason": "", "original_current": False}
    if "score" in props:
        return {"reason": "", "score": 2}
    return {"reason": "", "label": "Correct"}


def _ctx(tmp_path: Path, llm: FakeLLM, answerer: EchoAnswerer) -> RunContext:
    return RunContext(run_dir=tmp_path, llm=llm, judge=conf_judge(llm), workers=1, embedder=HashEmbedder(), answerer=answerer, log=logging.getLogger("test"))


def test_run_follows_halumem_protocol_and_resumes(tmp_path):
    llm, answerer, system = FakeLLM(_fixed_judge), EchoAnswerer(), KeywordMemory()
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=100)
    metrics = bench.run(system, _ctx(tmp_path, llm, answerer))

    # every session is added, the generated filler session too; turns carry ISO times and names
    assert len(system.adds) == 5
    namespace, turns, session_time = system.adds[0]
    assert namespace == f"halumem-{USER1}" and session_time == "2025-03-02T09:15:00"
    assert turns[0].speaker == "Martin Mark" and turns[1].speaker == "assistant"
    assert turns[0].session_time == "2025-03-02T09:15:00"

    counts = metrics["counts"]
    assert counts["users"] == 2 and counts["sessions_added"] == 5 and counts["generated_qa_sessions_skipped"] == 1
    assert counts["update_points"] == 3 and counts["questions"] == 9
    extraction = metrics["extraction"]
    assert extraction["counts"]["gold_points"] == 8 and extraction["counts"]["interference_points"] == 1
    # one stored memory per user utterance in the 4 scored sessions
    assert extraction["counts"]["stored_memories"] == 8
    # the judge said 2 everywhere, so the interference point counts as stored (not resisted)
    assert extraction["recall"]["mean"] == 1.0 and extraction["false_memory_resistance"]["mean"] == 0.0
    assert extraction["f1"]["mean"] == 1.0
    assert metrics["qa"]["correct"]["mean"] == 1.0 and metrics["main_metric"] == 1.0
    assert set(metrics["by_question_type"]) == set(QUESTION_TYPES)
    assert metrics["extraction_source"] == "inspect"
    # every search's returned text is counted (eval/tokens.py), QA and update searches alike
    qa_rows = [json.loads(line) for line in (tmp_path / "halumem_qa.jsonl").read_text().splitlines()]
    update_rows = [json.loads(line) for line in (tmp_path / "halumem_updates.jsonl").read_text().splitlines()]
    assert all(r["returned_tokens"] == sum(r["retrieved_tokens"]) and len(r["retrieved_tokens"]) == r["n_retrieved"] for r in qa_rows)
    assert all(r["returned_tokens"] == sum(r["retrieved_tokens"]) == sum(count_tokens(r["returned"])) for r in update_rows)
    assert metrics["returned_tokens"]["qa"]["n"] == 9 and metrics["returned_tokens"]["updates"]["n"] == 3
    assert metrics["qa"]["correct"]["n_clusters"] == 2  # the user interval beside the per-question one

    # QA searches with the question (20 results), asked at the session's end time; updates
    # search with the point's own content (10 results)
    assert ("What is the name of Lena's cat?", 20) in system.searches
    assert ("What is the name of Lena's cat?", 2, "2025-01-10T20:20:00") in answerer.calls
    assert ("Lena Wu lives in Munich.", 10) in system.searches
    assert len(system.searches) == 3 + 9

    judge_calls = len(llm.requests)
    assert judge_calls == 8 + 1 + 2 * 8 + 2 * 3 + 9  # integrity (gold + interference) + accuracy and fields + updates (two questions) + QA
    again = bench.run(KeywordMemory(), _ctx(tmp_path, llm, answerer))
    assert len(llm.requests) == judge_calls  # finished users are not redone
    assert again["qa"] == metrics["qa"] and again["extraction"] == metrics["extraction"]


def test_run_resumes_a_half_finished_user_without_rejudging(tmp_path):
    llm = FakeLLM(_fixed_judge)
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50)
    ctx = _ctx(tmp_path, llm, EchoAnswerer())
    bench.run(KeywordMemory(), ctx)
    done = (tmp_path / "halumem_users.jsonl").read_text().splitlines()
    (tmp_path / "halumem_users.jsonl").write_text(done[0] + "\n")  # as if killed during user 2
    before = len(llm.requests)
    system = KeywordMemory()
    bench.run(system, ctx)
    assert len(llm.requests) == before  # user 2's rows exist; its state is rebuilt by replaying adds only
    assert len(system.adds) == 3


def test_system_that_cannot_list_its_memories_gets_no_extraction_row(tmp_path):
    llm = FakeLLM(_fixed_judge)
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50)
    metrics = bench.run(BlindMemory(), _ctx(tmp_path, llm, EchoAnswerer()))
    assert metrics["extraction"] is None and metrics["extraction_skipped"]
    assert metrics["updating"]["n"] == 3 and metrics["qa"]["n"] == 9
    assert len(llm.requests) == 2 * 3 + 9  # two update questions per point (complete, then is the original current)
    with pytest.raises(ValueError, match="not Inspectable"):
        HaluMemBenchmark(path=str(TINY), extraction_source="inspect").run(BlindMemory(), _ctx(tmp_path / "x", llm, EchoAnswerer()))


def test_slices_limit_users_and_sessions(tmp_path):
    system = KeywordMemory()
    bench = HaluMemBenchmark(path=str(TINY), limit_users=1, limit_sessions=1, bootstrap_samples=50)
    metrics = bench.run(system, _ctx(tmp_path, FakeLLM(_fixed_judge), EchoAnswerer()))
    assert len(system.adds) == 1 and metrics["counts"]["questions"] == 2


def test_variant_label_is_configured_or_read_from_the_file_name():
    assert HaluMemBenchmark(path="data/HaluMem-Long.jsonl").variant_label == "Long"
    assert HaluMemBenchmark(path="data/HaluMem-medium.jsonl").variant_label == "Medium"
    assert HaluMemBenchmark(path="data/mine.jsonl", variant="Long").variant_label == "Long"
    assert HaluMemBenchmark(path=None).variant_label == "Medium"
    assert HaluMemBenchmark(path=str(TINY)).variant_label == "custom:halumem_tiny.jsonl"


def test_make_table_has_measured_and_labelled_paper_columns(tmp_path):
    llm = FakeLLM(_fixed_judge)
    with_extraction = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50).run(KeywordMemory(), _ctx(tmp_path / "a", llm, EchoAnswerer()))
    without = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50).run(BlindMemory(), _ctx(tmp_path / "b", llm, EchoAnswerer()))
    with_extraction["metadata"] = {"system": "keyword", "llm_model_id": "fake"}
    without["metadata"] = {"system": "blind", "llm_model_id": "fake"}
    table = HaluMemBenchmark.make_table([with_extraction, without])
    measured = [c for c in table.columns if not c.startswith(("paper:", "reported by"))]
    assert measured == ["keyword (HaluMem-custom:halumem_tiny.jsonl, fake; fixed protocol)", "blind (HaluMem-custom:halumem_tiny.jsonl, fake; fixed protocol)"]
    without["metadata"]["overrides"] = ["benchmark.limit_sessions=10"]
    sliced = [c for c in HaluMemBenchmark.make_table([without]).columns if c.startswith("blind")]
    assert sliced == ["blind (HaluMem-custom:halumem_tiny.jsonl, fake, sessions 0-9 only; fixed protocol)"]
    assert table.loc["Extraction F1", measured[0]].startswith("100.00")
    assert table.loc["Extraction F1", measured[1]] == "-"
    assert table.loc["Extraction F1", "paper: MOSAIC (HaluMem-Medium)"] == "86.77"
    assert table.loc["Update correct", "reported by HaluMem: MemOS (HaluMem-Medium, 20 users)"] == "62.11"
    zep = "reported by HaluMem: Zep (HaluMem-Medium, 20 users)"
    assert table.loc["Extraction F1", zep] == "" and table.loc["Update correct", zep] == "47.28"  # Zep lists no memories
    # two users: too few for the user interval, and the row says so; tokens each QA search returned (eval/tokens.py)
    assert table.loc["Interval shown", measured[0]] == "item bootstrap; 2 users, under 5: too few for a user interval"
    assert table.loc["Tokens returned per QA search (p50 / p95)", measured[0]] != "-"
    assert with_extraction["qa"]["correct"]["n_clusters"] == 2 and with_extraction["extraction"]["f1"]["n_clusters"] == 2
    assert table.loc["QA omission", "paper: MOSAIC (HaluMem-Medium)"] == "16.74"


# ----------------------------------------------------------------------------- oracle clarification
class ClarifyingMemory(KeywordMemory):
    """KeywordMemory that stores the first user utterance of each add and queues the others for
    clarification (value: the utterance's last word); targets come from the real mosaic.clarify."""

    name = "clarifying"

    def __init__(self) -> None:
        super().__init__()
        self.queue: dict[str, list] = {}
        self.answers: list[tuple[str, str]] = []

    def reset(self, namespace: str) -> None:
        super().reset(namespace)
        self.queue[namespace] = []

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        from mosaic.entity import Entity
        from mosaic.gate import ClarificationItem

        users = [t for t in turns if t.speaker != "assistant"]
        report = super().add(namespace, users[:1], session_time)
        for t in users[1:]:
            value = t.text.rstrip(".!?").split()[-1]
            entity = Entity(t.turn_id, t.text, "event", subject="user", attribute=t.turn_id, value=value, status="queued")
            self.queue[namespace].append(ClarificationItem(entity, 0.5, 1.0, "hedged", f"Is it true that {t.text}?"))
        return report

    def clarification_queue(self, namespace: str) -> list[dict]:
        return [item.to_dict() for item in self.queue[namespace]]

    def clarification_targets(self, namespace: str, budget: int) -> list[dict]:
        from mosaic.clarify import greedy_targets

        return [t.to_dict() for t in greedy_targets(self.queue[namespace], budget)]

    def resolve_clarification(self, namespace: str, item, answer=None) -> AddReport:
        [queued] = [q for q in self.queue[namespace] if q.entity.entity_id == item]
        self.answers.append((queued.entity.text, answer))
        if answer == "unknown":
            return AddReport()
        self.queue[namespace].remove(queued)
        if answer != "yes":
            return AddReport()
        stored = StoredItem(f"m{len(self.items[namespace])}", queued.entity.text, [queued.entity.entity_id])
        self.items[namespace].append(stored)
        return AddReport(stored=[stored])


def test_oracle_clarification_answers_from_gold_points_and_reports_with_and_without(tmp_path):
    llm, system = FakeLLM(_fixed_judge), ClarifyingMemory()
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=100, clarify="oracle", clarify_budget=2, clarify_match_threshold=0.4)
    metrics = bench.run(system, _ctx(tmp_path, llm, EchoAnswerer()))
    clarify = metrics["clarify"]
    # one queued utterance per scored session with two user turns; the hiking one shares 4 of its 9 content
    # words with the gold point "Martin Mark goes hiking near Hangzhou on weekends." (>= 0.4), and its
    # value "Hangzhou" is in that point: answered yes and stored
    assert ("No, never a bank. Consulting. On weekends I go hiking in the hills near Hangzhou.", "yes") in system.answers
    assert clarify["asked"] == len(system.answers) == sum(clarify["answers"].values())
    assert clarify["entities_committed"] == clarify["answers"]["yes"] >= 1
    # with: the clarified memories count as stored in their session; without: they do not
    with_n = metrics["extraction"]["counts"]["stored_memories"]
    without_n = clarify["without"]["extraction"]["counts"]["stored_memories"]
    assert with_n == without_n + clarify["entities_committed"]
    assert clarify["without"]["updating"]["correct"]["n"] == metrics["updating"]["correct"]["n"]
    assert metrics["variant"].endswith("+oracle-clarify")  # never the plain variant's Table 2 column


def test_oracle_clarification_refuses_a_system_without_targets(tmp_path):
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=100, clarify="oracle")
    with pytest.raises(ValueError, match="Clarifiable"):
        bench.run(KeywordMemory(), _ctx(tmp_path, FakeLLM(_fixed_judge), EchoAnswerer()))


class PreviousQueryMemory(KeywordMemory):
    """A search that depends on the one before it (MOSAIC's continuity term): the top result names the
    namespace's previous query, so each QA row's response records the state it was searched in."""

    name = "previous-query"
    parallel_search = False

    def __init__(self) -> None:
        super().__init__()
        self.previous: dict[str, str | None] = {}

    def reset(self, namespace: str) -> None:
        super().reset(namespace)
        self.previous[namespace] = None

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        found = super().search(namespace, query, k)
        marker = Retrieved(f"after {self.previous.get(namespace)}", 2.0, None, [], None)
        self.previous[namespace] = query
        return [marker, *found]


def test_a_resumed_user_searches_in_the_state_an_uninterrupted_run_had(tmp_path):
    """Killed in user 2 after some of its questions: the resumed run replays the searches of the scored ones
    (results dropped, nothing judged again), so the rest are answered as an uninterrupted run answered them."""
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50)

    def responses(run_dir: Path) -> dict[str, str]:
        rows = [json.loads(line) for line in (run_dir / "halumem_qa.jsonl").read_text().splitlines()]
        return {row["key"]: row["response"] for row in rows}

    clean, killed = tmp_path / "clean", tmp_path / "killed"
    bench.run(PreviousQueryMemory(), _ctx(clean, FakeLLM(_fixed_judge), EchoAnswerer()))
    llm = FakeLLM(_fixed_judge)
    bench.run(PreviousQueryMemory(), _ctx(killed, llm, EchoAnswerer()))
    users = (killed / "halumem_users.jsonl").read_text().splitlines()
    (killed / "halumem_users.jsonl").write_text(users[0] + "\n")
    qa = (killed / "halumem_qa.jsonl").read_text().splitlines()
    second = json.loads(users[1])["key"]
    kept = [line for line in qa if not json.loads(line)["key"].startswith(second)]
    kept += [line for line in qa if json.loads(line)["key"].startswith(second)][:1]  # killed after user 2's first answer
    (killed / "halumem_qa.jsonl").write_text("\n".join(kept) + "\n")
    assert len(kept) < len(qa)
    before = len(llm.requests)
    bench.run(PreviousQueryMemory(), _ctx(killed, llm, EchoAnswerer()))
    assert len(llm.requests) - before == len(qa) - len(kept)  # only the lost answers are judged again
    assert responses(killed) == responses(clean)
    assert any(text != "after None" for text in responses(clean).values())


def test_failed_verdicts_are_counted_and_only_they_are_redone_on_resume(tmp_path):
    """Rows whose LLM call failed were final (a short outage became a permanent result)."""
    from eval.rows import read_rows

    def qa_outage(messages, schema):
        return "" if schema is QA_SCHEMA else _fixed_judge(messages, schema)  # the QA verdicts come back empty

    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50)
    broken = FakeLLM(qa_outage)
    first = bench.run(KeywordMemory(), _ctx(tmp_path, broken, EchoAnswerer()))
    assert first["failures"] == {"rows": 9, "ingest_turns": 0}
    healthy = FakeLLM(_fixed_judge)
    again = bench.run(KeywordMemory(), _ctx(tmp_path, healthy, EchoAnswerer()))
    assert len(healthy.requests) == 9 and {r["schema"] is QA_SCHEMA for r in healthy.requests} == {True}
    assert again["failures"] == {"rows": 0, "ingest_turns": 0} and again["qa"]["correct"]["mean"] == 1.0
    assert len(read_rows(tmp_path / "halumem_qa.jsonl")) == 9


def test_a_data_file_edited_after_the_run_started_is_refused_before_any_row(tmp_path):
    """Parsed bytes are checked against the run folder's identity."""
    from eval.provenance import InputChangedError, read_hashed

    data = tmp_path / "HaluMem-Medium.jsonl"
    data.write_bytes(TINY.read_bytes())
    ctx = _ctx(tmp_path / "run", FakeLLM(_fixed_judge), EchoAnswerer())
    ctx.inputs = {str(data.resolve()): read_hashed(data)[1]}
    data.write_bytes(TINY.read_bytes().replace(b"Munich", b"Berlin"))
    with pytest.raises(InputChangedError, match=rf"{data} changed"):
        HaluMemBenchmark(path=str(data), bootstrap_samples=50).run(KeywordMemory(), ctx)
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").glob("*.jsonl"))
# ----------------------------------------------------------------------------- oracle facts and update links
def _point(index: int, content: str, update_of: tuple[str, ...] = (), source: str = "secondary"):
    from eval.benchmarks.halumem.data import MemoryPoint

    return MemoryPoint(index, content, "Persona Memory", source, bool(update_of), update_of, "Jan 01, 2029, 10:00:00", 0.5)


LINK_POINTS = (
    _point(1, "Ana moved to Munich.", ("Ana lives in Berlin.",)),
    _point(2, "Ana now works as a doctor.", ("Ana works as a nurse.",)),
    _point(3, "Ana has three dogs.", ("Ana has two dogs.",)),
    _point(4, "Ana sold her car.", ("Ana drives a red car.",)),  # what it replaces was never held
    _point(5, "Ana likes jazz."),
    _point(6, "Ana likes opera.", source="interference"),
)
GOLD_TEXT = {"0:p1": "Ana lives in Berlin.", "0:p2": "Ana works as a nurse.", "1:p1": "Ana has two dogs.", "1:p2": "Ana drinks tea every morning."}


def _event(new_text, old_id, verdict="update", new_fact=None, old_fact=None):
    from core.api import ConflictEvent

    return ConflictEvent(new_text=new_text, old_text="", verdict=verdict, old_memory_id=old_id, new_fact_id=new_fact, old_fact_id=old_fact)


def test_update_links_count_right_wrong_missed_nothing_held_and_false_alarms_by_fact_id():
    from eval.benchmarks.halumem.update_links import link_session, update_link_metrics

    # oracle run: held items name their gold fact; the matching goes through the gold text, not the item's own text
    held = [StoredItem("m-berlin", "(rendered differently)", [], "0:p1"), StoredItem("m-nurse", "Ana works as a nurse.", [], "0:p2"),
            StoredItem("m-dogs", "Ana has two dogs.", [], "1:p1"), StoredItem("m-tea", "Ana drinks tea every morning.", [], "1:p2")]  # fmt: skip
    events = [
        _event("Ana moved to Munich.", "m-berlin", "update", "3:p1", "0:p1"),  # point 1 -> what it replaces: right
        _event("Ana now works as a doctor.", "m-tea", "flag", "3:p2", "1:p2"),  # point 2 -> another memory: wrong
        _event("Ana likes jazz.", "m-tea", "flag", "3:p5", "1:p2"),  # a non-update point raised a conflict: false alarm
        _event("Ana likes jazz.", "m-dogs", "flag", "3:p5", "1:p1"),  # a second event of the same point: one point alarmed
    ]
    row = link_session(3, LINK_POINTS, held, events, GOLD_TEXT, HashEmbedder().encode, 0.8, 0.6)
    assert [(p["index"], p["outcome"], p["targets_held"], p["events"]) for p in row["points"]] == [
        (1, "right", 1, 1), (2, "wrong", 1, 1), (3, "missed", 1, 0), (4, "no_target", 0, 0)]
    assert row["points"][0]["verdicts"] == ["update"] and row["points"][1]["verdicts"] == ["flag"]
    assert (row["non_update_points"], row["false_alarms"], row["false_alarm_verdicts"], row["unmatched_events"], row["events"]) == (1, 2, {"flag": 2}, 0, 4)
    assert row["false_alarm_points"] == 1  # events can outnumber the points; the rate counts points
    # a model-extracted run: no fact ids, so held items and new items are matched by their text
    model_held = [StoredItem("x1", "Ana lives in Berlin.", []), StoredItem("x2", "Ana has two dogs.", [])]
    model_events = [_event("Ana moved to Munich.", "x1"), _event("Ana has three dogs.", "x1"), _event("zebra quantum violin", "x2")]
    model = link_session(3, LINK_POINTS, model_held, model_events, GOLD_TEXT, HashEmbedder().encode, 0.8, 0.6)
    # 1: right; 2: nothing like a nurse held; 3: linked to Berlin, not to the dogs; 4: nothing held
    assert [p["outcome"] for p in model["points"]] == ["right", "no_target", "wrong", "no_target"]
    assert (model["false_alarms"], model["false_alarm_points"], model["unmatched_events"]) == (0, 0, 1)
    totals = update_link_metrics([{"points": row["points"], **{k: v for k, v in row.items() if k != "points"}},
                                  {"points": model["points"], **{k: v for k, v in model.items() if k != "points"}}])  # fmt: skip
    assert {k: totals[k] for k in ("update_points", "right", "wrong", "missed", "no_target", "false_alarms", "false_alarm_points",
                                   "non_update_points", "unmatched_events")} == {
        "update_points": 8, "right": 2, "wrong": 2, "missed": 1, "no_target": 3, "false_alarms": 2, "false_alarm_points": 1,
        "non_update_points": 2, "unmatched_events": 1}  # fmt: skip
    assert totals["right_by_verdict"] == {"update": 2} and totals["false_alarms_by_verdict"] == {"flag": 2}
    # a run made before points were counted: its totals say so (None), never a count of events read as points
    old_row = {k: v for k, v in row.items() if k != "false_alarm_points"}
    assert update_link_metrics([old_row])["false_alarm_points"] is None


class ConflictingMemory(KeywordMemory):
    """KeywordMemory that reads the oracle facts it is given (stores them, with their fact ids) and reports an
    update event from each update point to the held item sharing most words with it (a scripted conflict check)."""

    name = "conflicting"

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        from core.api import ConflictEvent

        self.adds.append((namespace, turns, session_time))
        report = AddReport(n_turns=len(turns))
        for fact in (f for t in turns for f in t.oracle_facts):
            held = self.items[namespace]
            words = set(fact.text.lower().split())
            best = max(held, key=lambda item: len(words & set(item.text.lower().split())), default=None)
            if best is not None and "lives" in fact.text and "lives" in best.text:
                report.updated.append(ConflictEvent(fact.text, best.text, "update", old_memory_id=best.memory_id, new_fact_id=fact.fact_id, old_fact_id=best.fact_id))
            item = StoredItem(f"m{len(held)}", fact.text, [], fact.fact_id)
            held.append(item)
            report.stored.append(item)
        return report


def test_oracle_facts_reach_a_system_only_when_asked_on_the_last_turn_without_interference_or_answers(tmp_path):
    llm = FakeLLM(_fixed_judge)
    plain = KeywordMemory()
    HaluMemBenchmark(path=str(TINY), bootstrap_samples=20).run(plain, _ctx(tmp_path / "plain", llm, EchoAnswerer()))
    assert all(not t.oracle_facts for _, turns, _ in plain.adds for t in turns)
    system = ConflictingMemory()
    metrics = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20, oracle_facts=True).run(system, _ctx(tmp_path / "oracle", llm, EchoAnswerer()))
    users = load_halumem_jsonl(TINY)
    first_session = users[0].sessions[0]
    _, turns, _ = system.adds[0]
    assert all(not t.oracle_facts for t in turns[:-1])
    assert [(f.fact_id, f.text, f.subject, f.memory_type) for f in turns[-1].oracle_facts] == [
        (f"0:p{p.index}", p.content, users[0].name, p.memory_type) for p in first_session.memory_points if not p.is_interference]
    assert len(turns[-1].oracle_facts) == len(first_session.memory_points) - 1  # the interference point stays out
    answers = {q.answer for u in users for s in u.sessions for q in s.questions}
    assert not answers & {f.text for _, ts, _ in system.adds for t in ts for f in t.oracle_facts}
    assert metrics["oracle_facts"] is True
    links = metrics["update_links"]
    # tiny fixture: user 1's job update (its original memory is held, no event: missed); user 2's move (linked: right)
    # and its race update (what it replaces was never said: nothing held)
    assert {k: links[k] for k in ("update_points", "right", "wrong", "missed", "no_target", "false_alarms")} == {
        "update_points": 3, "right": 1, "wrong": 0, "missed": 1, "no_target": 1, "false_alarms": 0}
    assert links["non_update_points"] == 8 and links["held_similarity"] == 0.8
    meta = {"system": "mosaic", "ablation": "oracle_extractor", "llm_model_id": "fake", "system_metadata": {"row_label": "MOSAIC with the oracle extractor"}}
    table = HaluMemBenchmark.make_table([{**metrics, "metadata": meta}])
    assert list(table.columns)[0] == "MOSAIC with the oracle extractor / oracle_extractor (HaluMem-custom:halumem_tiny.jsonl, fake; fixed protocol)"
    assert table.loc["Update links: right"].iloc[0] == "1 of 3" and table.loc["Update links: false alarms (non-update points alarmed)"].iloc[0] == "0 of 8"


class SupersedingMemory(ConflictingMemory):
    """ConflictingMemory that also drops the held item an update event names (as MOSAIC supersedes it)."""

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        report = super().add(namespace, turns, session_time)
        replaced = {event.old_memory_id for event in report.updated}
        self.items[namespace] = [item for item in self.items[namespace] if item.memory_id not in replaced]
        return report


def test_qa_rows_name_evidence_retrieved_and_held_gold_facts_by_id_for_the_mechanism_analysis(tmp_path):
    from eval.benchmarks.halumem.benchmark import evidence_fact_ids
    from eval.rows import read_rows

    HaluMemBenchmark(path=str(TINY), bootstrap_samples=20, oracle_facts=True).run(SupersedingMemory(), _ctx(tmp_path, FakeLLM(_fixed_judge), EchoAnswerer()))
    rows = {row["key"]: row for row in read_rows(tmp_path / "halumem_qa.jsonl")}
    lena_now = rows[f"{USER2}:2:q0"]  # "Which city does Lena live in now?" after the move (session 1 is filler)
    assert lena_now["evidence_fact_ids"] == ["2:p1"] and lena_now["evidence_held"] == ["2:p1"] == lena_now["evidence_ever_held"]
    assert "2:p1" in lena_now["retrieved_fact_ids"] and "0:p2" not in lena_now["retrieved_fact_ids"]  # Berlin was superseded
    dog = rows[f"{USER1}:0:q1"]  # a question with no evidence (an abstention item)
    assert dog["n_evidence"] == 0 and dog["evidence_fact_ids"] == []
    assert all(set(row["evidence_held"]) <= set(row["evidence_ever_held"]) <= set(row["evidence_fact_ids"]) for row in rows.values())
    # a gold point said in two sessions is its latest copy up to the question's session; an unknown text has no id
    gold_ids = {"Ana likes tea.": [(0, "0:p1"), (2, "2:p4")]}
    assert evidence_fact_ids(["Ana likes tea.", "never a point"], gold_ids, 1) == ["0:p1"]
    assert evidence_fact_ids(["Ana likes tea."], gold_ids, 2) == ["2:p4"]
    # a superseded evidence fact: held once, not now; a retrieved item the snapshot does not know has no id
    facts = {"gold_ids": {"Ana lives in Rome.": [(0, "0:p1")], "Ana lives in Oslo.": [(1, "1:p3")]}, "held": {"1:p3"},
             "ever_held": {"0:p1", "1:p3"}, "by_memory": {"m1": "1:p3"}}  # fmt: skip
    fields = HaluMemBenchmark._evidence_fields(["Ana lives in Rome.", "Ana lives in Oslo."],
                                               [Retrieved("x", 1.0, None, [], "m1"), Retrieved("y", 0.5, None, [], "m9")], facts, 1)
    assert fields == {"n_evidence": 2, "evidence_fact_ids": ["0:p1", "1:p3"], "retrieved_fact_ids": ["1:p3"],
                      "evidence_held": ["1:p3"], "evidence_ever_held": ["0:p1", "1:p3"]}  # fmt: skip
    # a model-extracted run's items carry no fact id: the lists stay empty, never guessed
    plain = tmp_path / "plain"
    HaluMemBenchmark(path=str(TINY), bootstrap_samples=20).run(KeywordMemory(), _ctx(plain, FakeLLM(_fixed_judge), EchoAnswerer()))
    assert all(row["retrieved_fact_ids"] == [] == row["evidence_held"] for row in read_rows(plain / "halumem_qa.jsonl"))


def test_update_links_are_left_out_for_an_append_only_system(tmp_path):
    class AppendOnly(KeywordMemory):
        conflict_signal = False

    metrics = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20).run(AppendOnly(), _ctx(tmp_path, FakeLLM(_fixed_judge), EchoAnswerer()))
    assert metrics["update_links"] is None
    meta = {"system": "rag", "ablation": "oracle_facts", "llm_model_id": "fake", "system_metadata": {"row_label": "rag over oracle facts"}}
    table = HaluMemBenchmark.make_table([{**metrics, "metadata": meta}])
    assert list(table.columns)[0] == "rag over oracle facts / oracle_facts (HaluMem-custom:halumem_tiny.jsonl, fake; fixed protocol)"
    assert "Update links: right" not in table.index


def test_score_extraction_off_reads_what_was_stored_for_update_links_but_asks_no_extraction_judge(tmp_path):
    judged = FakeLLM(_fixed_judge)
    full = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20, oracle_facts=True).run(ConflictingMemory(), _ctx(tmp_path / "full", judged, EchoAnswerer()))
    cheap_llm = FakeLLM(_fixed_judge)
    cheap = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20, oracle_facts=True, score_extraction=False).run(
        ConflictingMemory(), _ctx(tmp_path / "cheap", cheap_llm, EchoAnswerer()))
    assert cheap["extraction"] is None and "score_extraction=false" in cheap["extraction_skipped"]
    assert cheap["update_links"] == full["update_links"]  # links need only the snapshots, not the judge
    assert (cheap["updating"], cheap["qa"]) == (full["updating"], full["qa"])
    assert len(cheap_llm.requests) == 2 * cheap["updating"]["n"] + cheap["qa"]["n"] < len(judged.requests)  # two questions per update


def test_a_writes_only_run_counts_update_links_with_no_search_answer_or_judge_call(tmp_path):
    """score_updating=false, score_qa=false (item 4's link study): the adds and the link counts, nothing asked."""
    full = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20, oracle_facts=True, score_extraction=False).run(
        ConflictingMemory(), _ctx(tmp_path / "full", FakeLLM(_fixed_judge), EchoAnswerer()))
    silent = FakeLLM(_fixed_judge)
    answerer = EchoAnswerer()
    writes = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20, oracle_facts=True, score_extraction=False, score_updating=False,
                              score_qa=False).run(ConflictingMemory(), _ctx(tmp_path / "writes", silent, answerer))  # fmt: skip
    assert writes["update_links"] == full["update_links"] and writes["update_links"]["update_points"] == 3
    assert silent.requests == [] and answerer.calls == [] and writes["updating"] is None and writes["qa"] is None and writes["main_metric"] is None
    assert writes["counts"]["update_points"] == writes["counts"]["questions"] == 0 and writes["tasks_skipped"] == ["updating", "qa"]
    meta = {"system": "mosaic", "ablation": "oracle_extractor", "llm_model_id": "fake", "system_metadata": {"row_label": "MOSAIC with the oracle extractor"}}
    table = HaluMemBenchmark.make_table([{**writes, "metadata": meta}])
    assert table.loc["QA correct"].iloc[0] == "-" and table.loc["Update links: right"].iloc[0] == "1 of 3"


class EmptySearchMemory(KeywordMemory):
    """Stores as KeywordMemory does; every search comes back empty."""

    name = "empty-search"

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        self.searches.append((query, k))
        return []


def test_an_update_point_whose_search_returned_nothing_is_judged_for_integrity_instead(tmp_path):
    """HaluMem's process_user sends an is_update point to the update task only when its search returned something;
    otherwise it stays in the integrity/recall set (it used to count as an update Omission)."""
    llm = FakeLLM(_fixed_judge)
    metrics = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20).run(EmptySearchMemory(), _ctx(tmp_path, llm, EchoAnswerer()))
    assert metrics["counts"]["update_points"] == 0 and metrics["counts"]["update_points_routed_to_integrity"] == 3
    assert metrics["updating"]["n"] == 0 and metrics["updating"]["correct"]["mean"] is None
    assert metrics["extraction"]["counts"]["gold_points"] == 8 + 3
    assert not any(r["schema"] in (UPDATE_CONTENT_SCHEMA, UPDATE_ORIGINAL_SCHEMA) for r in llm.requests)
    again = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20).run(EmptySearchMemory(), _ctx(tmp_path, llm, EchoAnswerer()))
    assert again["extraction"] == metrics["extraction"]  # a resumed run routes the same points the same way


def test_version_ranks_tell_a_superseding_search_from_an_append_only_one():
    """The LLM-free update companion: the new version ranked above the replaced one, without a judge."""
    from eval.benchmarks.halumem.metrics import ranking_metrics
    from eval.benchmarks.halumem.update_ranking import new_above_old, version_ranks

    encode, new, old = HashEmbedder().encode, "Lena Wu lives in Munich now.", "Lena Wu lives in Berlin."
    superseding = version_ranks(["Lena Wu lives in Munich now.", "Lena has a cat."], new, [old], encode, 0.99)
    append_only = version_ranks(["Lena Wu lives in Berlin.", "Lena Wu lives in Munich now."], new, [old], encode, 0.99)
    nothing = version_ranks(["Lena has a cat."], new, [old], encode, 0.99)
    assert superseding == {"rank_new": 1, "rank_old": None} and new_above_old(superseding)
    assert append_only == {"rank_new": 2, "rank_old": 1} and not new_above_old(append_only)
    assert nothing == {"rank_new": None, "rank_old": None}
    m = ranking_metrics([superseding, append_only, nothing], n_boot=20, seed=0)
    assert m["new_above_old"]["mean"] == pytest.approx(1 / 3) and m["old_above_new"]["mean"] == pytest.approx(1 / 3)
    assert ranking_metrics([{"label": "Correct"}], n_boot=20, seed=0) is None  # rows made without an embedder


def test_update_rows_carry_version_ranks_when_the_run_has_an_embedder(tmp_path):
    metrics = HaluMemBenchmark(path=str(TINY), bootstrap_samples=20).run(KeywordMemory(), _ctx(tmp_path, FakeLLM(_fixed_judge), EchoAnswerer()))
    assert metrics["updating"]["version_ranking"]["new_above_old"]["n"] == 3
