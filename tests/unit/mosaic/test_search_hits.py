"""The hits a search adds and how they read (mosaic/search_hits.py): provenance quotes
(``retrieval.with_source_turns``), turn matching (``retrieval.match_source_turns``) and superseded memories
marked outdated (``superseded: mark``)."""

from __future__ import annotations

from functools import partial

from eval.answerer import Answerer
from mosaic.memory import MosaicMemory
from mosaic.retrieval import Retriever
from mosaic.search_hits import source_turns
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_gold_judge import _oracle_memory, _turn
from tests.unit.mosaic.test_graph import BowEmbedder
from tests.unit.mosaic.test_memory import ScriptedDetector, _add, responder


def _provenance_memory(tmp_path, on: bool) -> MosaicMemory:
    return MosaicMemory(retry=None, llm=FakeLLM(responder), embedder=BowEmbedder(), workdir=tmp_path,
                        retrieval=partial(Retriever, mode="exact", top_k=5, with_source_turns=on),
                        conflict=lambda llm: ScriptedDetector(llm, "update"))


def test_provenance_quotes_each_source_turn_once_and_never_a_superseded_fact(tmp_path):
    mem = _provenance_memory(tmp_path, on=True)
    _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    _add(mem, "c", "D1:2", "I work as a nurse.", when="2023-05-08")
    _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-01")  # supersedes "2 dogs"
    hits = mem.search("c", "How many dogs does Ana have?", 5)
    texts = " ".join(h.text for h in hits)
    assert 'Ana: "We have three dogs now."' in texts and 'Ana: "I work as a nurse."' in texts
    assert "two dogs" not in texts and "Ana has 2 dogs" not in texts  # the superseded entity and its turn stay out
    assert texts.count("We have three dogs now.") == 1


def test_provenance_dedups_a_turn_shared_by_two_entities(tmp_path):
    mem = _provenance_memory(tmp_path, on=True)
    _add(mem, "c", "D1:1", "I work as a nurse.")
    space = mem._space("c")
    second = next(iter(space.graph.entities()))
    hits = [second, second]  # the same source turn cited twice in one answer
    shown: set[str] = set()
    quoted = [source_turns(space, e, shown) for e in hits]
    assert quoted[0].count("I work as a nurse.") == 1 and quoted[1] == ""


def test_provenance_is_off_by_default_and_turns_persist(tmp_path):
    off = _provenance_memory(tmp_path / "off", on=False)
    _add(off, "c", "D1:1", "I work as a nurse.")
    assert [h.text for h in off.search("c", "job?", 3)] == ["Ana works as a nurse"]
    on = _provenance_memory(tmp_path / "on", on=True)
    _add(on, "c", "D1:1", "I work as a nurse.")
    reloaded = _provenance_memory(tmp_path / "on", on=True)  # a new process reads the store back
    assert reloaded.snapshot("c")["turns"]["D1:1"]["text"] == "I work as a nurse."
    assert 'Ana: "I work as a nurse."' in reloaded.search("c", "job?", 3)[0].text


def test_provenance_stays_within_the_answerers_budget(tmp_path):
    mem = _provenance_memory(tmp_path, on=True)
    _add(mem, "c", "D1:1", "I work as a nurse.")
    _add(mem, "c", "D1:2", "I have two dogs.")
    hits = mem.search("c", "job?", 5)
    answerer = Answerer(FakeLLM(responder), max_context_tokens=15)
    lines = answerer.memory_lines(hits)
    assert sum(answerer.approx_tokens(line) for line in lines) <= 15 or len(lines) == 1
    assert len(lines) < len(hits)


def _matching_memory(tmp_path, on: bool) -> MosaicMemory:
    return MosaicMemory(retry=None, llm=FakeLLM(responder), embedder=BowEmbedder(), workdir=tmp_path,
                        retrieval=partial(Retriever, mode="exact", top_k=5, match_source_turns=on),
                        conflict=lambda llm: ScriptedDetector(llm, "update"))


def test_turn_matching_finds_a_held_entity_through_its_turn_and_never_a_superseded_one(tmp_path):
    on, off = _matching_memory(tmp_path / "on", True), _matching_memory(tmp_path / "off", False)
    for mem in (on, off):
        _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
        _add(mem, "c", "D1:2", "I work as a nurse.", when="2023-05-08")
        _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-01")  # supersedes "2 dogs"
    # "i work" shares no word with the entity "Ana works as a nurse", only with its turn "Ana: I work as a nurse."
    found = on.search("c", "i work", 1)
    assert found[0].text == "Ana works as a nurse" and found[0].score > 0.4
    assert on.metrics()["mechanisms"]["retrieval"]["turn_matches"] >= 1
    assert all(hit.score <= on.search_weight + 1e-9 for hit in off.search("c", "i work", 2))  # entity texts: similarity 0
    assert off.metrics()["mechanisms"]["retrieval"]["turn_matches"] == 0
    # the superseded entity's turn matches best, yet only held entities come back
    assert all("2 dogs" not in hit.text for hit in on.search("c", "i have two dogs", 5))


def test_search_marks_a_superseded_memory_outdated_when_asked_and_hides_it_by_default(tmp_path):
    texts = {}
    for mode in ("hide", "mark"):
        memory = _oracle_memory(tmp_path / mode, True)
        memory.superseded = mode
        memory.add("u", [_turn("s0", [("0:p0", "Mara waters the greenhouse tomatoes every morning.", ())])], session_time="2024-01-01")
        memory.add("u", [_turn("s1", [("1:p0", "Mara waters the greenhouse tomatoes in the evening now.", ("0:p0",))])],
                   session_time="2024-02-01T09:00:00")
        texts[mode] = [r.text for r in memory.search("u", "When does Mara water the tomatoes?", 5)]
    assert texts["hide"] == ["Mara waters the greenhouse tomatoes in the evening now."]
    assert "Mara waters the greenhouse tomatoes every morning. (outdated: replaced by a newer memory on 2024-02-01)" in texts["mark"]
