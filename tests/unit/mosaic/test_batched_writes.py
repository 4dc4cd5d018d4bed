"""The batched write path with scripted LLMs: one conflict call judges a group's checks
(``conflict.batch``), and a session's turns are written in groups (``extract.turns_per_call``)."""

from __future__ import annotations

import math
from functools import partial

import pytest

from core.api import Turn
from mosaic.conflict import ConflictDetector
from mosaic.conflict_judgement import build_nli_messages
from mosaic.entity import Entity
from mosaic.extract import EntityExtractor
from mosaic.memory import MosaicMemory
from mosaic.retrieval import Retriever
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_conflict import RULES, HashEmbedder, LogprobLLM, _graph
from tests.unit.mosaic.test_graph import BowEmbedder
from core.config_check import check_kwargs
from mosaic.settings import combination_problems


class BatchLogprobLLM(FakeLLM):
    """Replies ``1. <label>\\n2. <label>...`` with log-probabilities at each label token, like llama.cpp."""

    def __init__(self, answers: list[dict[str, float]]) -> None:
        super().__init__(lambda m, s: self._text())
        self.answers = answers

    def _text(self) -> str:
        return "\n".join(f"{n}. {max(p, key=p.get)}" for n, p in enumerate(self.answers, start=1))

    def chat(self, messages, **kwargs):
        result = super().chat(messages, **kwargs)
        positions = []
        for n, probs in enumerate(self.answers, start=1):
            top = [{"token": " " + tok, "logprob": math.log(p)} for tok, p in probs.items()]
            positions += [{"token": str(n), "top_logprobs": []}, {"token": ".", "top_logprobs": []},
                          {"token": " " + max(probs, key=probs.get), "top_logprobs": top}, {"token": "\n", "top_logprobs": []}]  # fmt: skip
        result.logprobs = positions
        return result


FALSE = {"false": 0.9, "unknown": 0.05, "true": 0.05}
UNKNOWN = {"false": 0.1, "unknown": 0.8, "true": 0.1}

# invented cycling-club statements (not from any conflict suite)
WATER = Entity("n1", "Riders may skip carrying water on summer rides.", "persona", session_time="2024-02-01")
NOAH = Entity("n2", "Noah Berg joined the Sunday group ride alone, without a parent.", "event", session_time="2024-02-01")



def test_a_group_is_judged_in_one_call_with_one_label_each():
    llm = BatchLogprobLLM([UNKNOWN, FALSE])
    detector = ConflictDetector(llm, batch=True)
    graph = _graph(RULES)
    vectors = HashEmbedder().encode([WATER.text, NOAH.text])
    water, noah = detector.check_group([(WATER, vectors[0], []), (NOAH, vectors[1], [])], graph)
    # one call judges the group; the one "false" over several facts asks one more one-token call naming the fact
    assert len(llm.requests) == 2 and llm.requests[0]["max_tokens"] == 8 and llm.requests[0]["purpose"] == "conflict"
    assert llm.requests[1]["max_tokens"] == 1 and llm.requests[1]["messages"][-1]["content"].endswith("Contradicted fact (number, 0 if none):")
    assert water == [] and len(noah) == 1 and noah[0].new_id == "n2"
    asked = llm.requests[0]["messages"][-1]["content"]
    assert asked.startswith("Check 1:\nFacts:\n") and f"NEW: {WATER.text}" in asked and "\n\nCheck 2:\nFacts:\n" in asked
    assert detector.stats["checks"] == 2 and detector.stats["llm_calls"] == 2 and detector.stats["batched_checks"] == 2
    assert detector.stats["blame_calls"] == 1
    assert [t["batched"] for t in detector.last_group_traces] == [2, 2]


def test_a_group_with_one_llm_check_asks_the_single_prompt():
    single, grouped = BatchLogprobLLM([FALSE]), BatchLogprobLLM([FALSE])
    graph = _graph(RULES)
    vector = HashEmbedder().encode([NOAH.text])[0]
    ConflictDetector(single).check(NOAH, graph)
    ConflictDetector(grouped, batch=True).check_group([(NOAH, vector, [])], graph)
    assert grouped.requests[0]["messages"] == single.requests[0]["messages"]
    assert grouped.requests[0]["messages"][0]["content"] == build_nli_messages(["x"], "y")[0]["content"]


def test_numbers_and_restatements_stay_out_of_the_batched_call():
    llm = LogprobLLM(FALSE)  # one LLM check left: the single prompt, its label first
    detector = ConflictDetector(llm, batch=True)
    graph = _graph(RULES)
    numbers = Entity("m", "Beginners ride 30 km on their first outing and can build up to a maximum of 60 km per ride.", "persona",
                     session_time="2024-02-01")
    same = Entity("s", "Every rider carries 2 litres of water on summer rides!", "persona", session_time="2024-02-01")
    items = [(e, HashEmbedder().encode([e.text])[0], []) for e in (numbers, same, NOAH)]
    decided = detector.check_group(items, graph)
    assert [d.conflict_type for d in decided[0]] == ["numeric"] and decided[1] == [] and len(decided[2]) == 1
    assert "Check 1" not in llm.requests[0]["messages"][-1]["content"]  # one LLM check: single prompt
    assert len(llm.requests) == 2 and llm.requests[1]["max_tokens"] == 1  # and one call naming the fact it found false


def test_a_later_check_sees_the_groups_earlier_entity():
    detector = ConflictDetector(FakeLLM(lambda m, s: "unknown"), batch=True, min_similarity=0.0)
    graph = _graph(["The library opens at nine."])
    first = Entity("a", "Mara waters the greenhouse tomatoes every morning.", "persona")
    second = Entity("b", "Mara waters the greenhouse tomatoes every evening.", "persona")
    vectors = HashEmbedder().encode([first.text, second.text])
    detector.check_group([(first, vectors[0], []), (second, vectors[1], [])], graph)
    later = detector.last_group_traces[1]
    assert later["candidates"][0][0] == "a"  # not in the graph yet, but judged before it in this group


def test_an_unparsed_check_is_counted_and_decides_nothing():
    llm = BatchLogprobLLM([FALSE])  # answers one line for two checks
    detector = ConflictDetector(llm, batch=True)
    vectors = HashEmbedder().encode([WATER.text, NOAH.text])
    decided = detector.check_group([(WATER, vectors[0], []), (NOAH, vectors[1], [])], _graph(RULES))
    assert len(decided[0]) == 1 and decided[1] == [] and detector.stats["batch_unparsed"] == 1




def test_batch_needs_nli_without_explanations():
    [problem] = combination_problems({"conflict": {"batch": True, "mode": "pick"}})
    assert "system.conflict.batch=true needs system.conflict.mode=nli" in problem
    [problem] = combination_problems({"conflict": {"batch": True, "explain": True}})
    assert "explain=True" in problem


# -- the memory's write groups ---------------------------------------------------------------
SAID = {"I have two dogs.": ("Ana has 2 dogs", "number of dogs", "2"), "I work as a nurse.": ("Ana works as a nurse", "job", "nurse"),
        "I sing in a choir.": ("Ana sings in a choir", "hobby", "choir"), "We got a third dog.": ("Ana has 3 dogs", "number of dogs", "3")}


def group_responder(messages, schema):
    """Extraction (single or group prompt): one fact per known message, named by its number."""
    if messages[0]["content"].startswith("Extract facts"):
        lines = [line for line in messages[-1]["content"].split("\n") if line.startswith("Message")]
        facts = []
        for number, line in enumerate(lines, start=1):
            text = line.split(": ", 1)[1]
            if text in SAID:
                fact, attr, value = SAID[text]
                facts.append({"msg": number, "fact": fact, "type": "persona", "who": "Ana", "attr": attr, "value": value,
                              "when": "", "cert": "stated", "spec": "exact"})  # fmt: skip
        return {"facts": facts}
    if messages[0]["content"].startswith("You judge"):
        return {"probabilities": [0.2, 0.8]}
    return "unknown"


def _mem(tmp_path, turns_per_call: int, batch: bool) -> tuple[MosaicMemory, FakeLLM]:
    llm = FakeLLM(group_responder)
    mem = MosaicMemory(retry=None, llm=llm, embedder=BowEmbedder(), workdir=tmp_path, retrieval=partial(Retriever, mode="exact", top_k=5),
                       extract=partial(EntityExtractor, turns_per_call=turns_per_call),
                       conflict=partial(ConflictDetector, batch=batch))  # fmt: skip
    return mem, llm


def _session(texts: list[str], session: int) -> list[Turn]:
    return [Turn(f"D{session}:{i}", "Ana", text) for i, text in enumerate(texts, start=1)]


def test_a_session_is_written_in_groups_and_costs_are_booked_per_turn(tmp_path):
    mem, llm = _mem(tmp_path, turns_per_call=2, batch=True)
    report = mem.add("c", _session(["I have two dogs.", "I work as a nurse.", "I sing in a choir."], 1), "2023-05-08")
    extraction = [r for r in llm.requests if r["purpose"] == "extraction"]
    assert len(extraction) == 2  # turns 1+2 in one call, turn 3 alone (the single prompt)
    assert "Message 2 from Ana: I work as a nurse." in extraction[0]["messages"][-1]["content"]
    assert extraction[1]["messages"][-1]["content"].endswith("Message from Ana: I sing in a choir.")
    assert report.n_turns == 3 and len(report.stored) == 3
    assert {item.source_turn_ids[0] for item in report.stored} == {"D1:1", "D1:2", "D1:3"}
    log = mem._spaces["c"].cost_log
    assert [row["turn_id"] for row in log] == ["D1:1", "D1:2", "D1:3"] and log[0]["group"] == ["D1:1", "D1:2"]
    assert log[0]["usage"]["calls"] == 0 and log[1]["usage"]["calls"] >= 1 and [row["stored"] for row in log] == [1, 1, 1]
    assert sum(row["usage"]["calls"] for row in log) == len(llm.requests)


def test_groups_never_span_two_sessions(tmp_path):
    mem, llm = _mem(tmp_path, turns_per_call=2, batch=False)
    turns = [Turn("D1:1", "Ana", "I have two dogs.", session_time="2023-05-08"), Turn("D2:1", "Ana", "I work as a nurse.", session_time="2023-06-01")]
    mem.add("c", turns)
    assert len([r for r in llm.requests if r["purpose"] == "extraction"]) == 2


def test_a_numeric_change_in_a_later_group_updates_the_held_fact(tmp_path):
    mem, _ = _mem(tmp_path, turns_per_call=2, batch=True)
    mem.add("c", _session(["I have two dogs.", "I work as a nurse."], 1), "2023-05-08")
    report = mem.add("c", _session(["We got a third dog.", "I sing in a choir."], 2), "2023-06-01")
    assert [(e.old_text, e.new_text, e.verdict) for e in report.updated] == [("Ana has 2 dogs", "Ana has 3 dogs", "update")]


def test_one_turn_per_call_writes_as_before(tmp_path):
    """turns_per_call=1 and batch=false (the defaults) make the same calls, in the same order, as the paper's path."""
    grouped, grouped_llm = _mem(tmp_path / "a", turns_per_call=1, batch=False)
    session = _session(["I have two dogs.", "I work as a nurse."], 1)
    grouped.add("c", session, "2023-05-08")
    default_llm = FakeLLM(group_responder)
    default = MosaicMemory(retry=None, llm=default_llm, embedder=BowEmbedder(), workdir=tmp_path / "b", retrieval=partial(Retriever, mode="exact", top_k=5))
    default.add("c", session, "2023-05-08")
    assert [r["messages"] for r in grouped_llm.requests] == [r["messages"] for r in default_llm.requests]
    assert all("group" not in row for row in grouped._spaces["c"].cost_log)


def _ahead_mem(tmp_path, concurrent_calls: int) -> tuple[MosaicMemory, FakeLLM]:
    llm = FakeLLM(group_responder)
    mem = MosaicMemory(retry=None, llm=llm, embedder=BowEmbedder(), workdir=tmp_path, retrieval=partial(Retriever, mode="exact", top_k=5),
                       extract=partial(EntityExtractor, concurrent_calls=concurrent_calls, context_chars=200))  # fmt: skip
    return mem, llm


def _write_two_sessions(mem: MosaicMemory) -> list:
    reports = [mem.add("c", _session(["I have two dogs.", "I work as a nurse.", "I sing in a choir."], 1), "2023-05-08")]
    reports.append(mem.add("c", _session(["We got a third dog.", "I quit the choir."], 2), "2023-06-01"))
    return reports


def test_extraction_ahead_sends_the_same_requests_and_writes_the_same_memory(tmp_path):
    """``extract.concurrent_calls`` > 1 makes a session's extraction calls first, several at a time.
    Every request (prompt with its previous turn, schema, max_tokens) equals one-by-one writing's, and so do
    the memory, the events and the usage each add reports; only the order of calls changes."""
    serial, serial_llm = _ahead_mem(tmp_path / "serial", 1)
    ahead, ahead_llm = _ahead_mem(tmp_path / "ahead", 3)
    serial_reports, ahead_reports = _write_two_sessions(serial), _write_two_sessions(ahead)

    def extraction(llm):
        return sorted(str(r) for r in llm.requests if r["purpose"] == "extraction")

    assert len(extraction(ahead_llm)) == 5 and extraction(ahead_llm) == extraction(serial_llm)
    assert "Previous message (Ana): I work as a nurse." in str(ahead_llm.requests)  # turn 3 saw turn 2 as before
    first_writes = [r["purpose"] for r in ahead_llm.requests][:3]
    assert first_writes == ["extraction"] * 3  # session 1's calls all went out before its first write
    assert sorted(str(r) for r in ahead_llm.requests) == sorted(str(r) for r in serial_llm.requests)
    for mine, theirs in zip(ahead_reports, serial_reports):
        assert [(s.memory_id, s.text) for s in mine.stored] == [(s.memory_id, s.text) for s in theirs.stored]
        assert [(e.old_text, e.new_text, e.verdict) for e in mine.updated] == [(e.old_text, e.new_text, e.verdict) for e in theirs.updated]
        assert mine.usage.calls == theirs.usage.calls and mine.usage.by_purpose == theirs.usage.by_purpose
    log = ahead._spaces["c"].cost_log
    assert sum(row["usage"]["calls"] for row in log) == len(ahead_llm.requests)
    assert [row["usage"]["by_purpose"].get("extraction", {}).get("calls", 0) for row in log] == [1] * 5


def test_extraction_ahead_is_off_where_a_turn_depends_on_memory(tmp_path):
    """Held facts shown to the extractor depend on what earlier turns stored: no calls ahead then."""
    llm = FakeLLM(group_responder)
    mem = MosaicMemory(retry=None, llm=llm, embedder=BowEmbedder(), workdir=tmp_path, retrieval=partial(Retriever, mode="exact", top_k=5),
                       extract=partial(EntityExtractor, concurrent_calls=3, held_facts=2))  # fmt: skip
    assert not mem.extractor.can_extract_ahead()
    with pytest.raises(ValueError, match=r"extract.concurrent_calls=0: must be int >= 1"):
        check_kwargs(EntityExtractor, {"concurrent_calls": 0}, "system.extract")
