"""MosaicMemory control flow with a scripted LLM and a scripted conflict detector:
update / reject / flag are applied and reported, the gate queues, costs are split by purpose,
snapshots and the on-disk store restore the same memory."""

from __future__ import annotations

from functools import partial

import pytest

from mosaic.conflict import ConflictDecision, ConflictDetector
from mosaic.entity import Entity
from mosaic.gate import ConfidenceGate
from mosaic.memory import MosaicMemory
from mosaic.extract import EntityExtractor
from mosaic.retrieval import Retriever
from core.api import Inspectable, MemorySystem, Seedable, Snapshottable, Turn
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_graph import BowEmbedder

FACTS = {
    "I have two dogs.": ("Ana has 2 dogs", "2", "stated"),
    "We have three dogs now.": ("Ana has 3 dogs", "3", "stated"),
    "Maybe we have four dogs?": ("Ana has 4 dogs", "4", "hedged"),
    "I work as a nurse.": ("Ana works as a nurse", "", "stated"),
}


def responder(messages, schema):
    system = messages[0]["content"]
    if system.startswith("Extract facts"):
        text = messages[-1]["content"].split(": ", 2)[-1].split("\n")[-1].split(": ", 1)[-1]
        if text not in FACTS:
            return {"facts": []}
        fact, value, directness = FACTS[text]
        attribute = "number of dogs" if value else "job"
        return {"facts": [{"fact": fact, "type": "persona", "who": "Ana", "attr": attribute, "value": value or "nurse",
                           "when": "", "cert": directness, "spec": "exact"}]}
    if system.startswith("You judge"):
        return {"probabilities": [0.2, 0.8]}
    raise AssertionError(f"unexpected prompt: {system[:60]}")


class ScriptedDetector(ConflictDetector):
    """Contradiction = same attribute, different value; the verdict is fixed by the test (``None``: finds nothing).
    The belief decisions and the policy they use are the real detector's."""

    def __init__(self, llm, verdict: str | None = "update", **kwargs) -> None:
        super().__init__(llm, **kwargs)
        self.verdict = verdict
        self.calls = 0
        self.proposed: list[list[str]] = []  # held ids the extraction proposed, per check

    def check(self, new: Entity, graph, proposed=None) -> list[ConflictDecision]:
        self.calls += 1
        self.proposed.append([e.entity_id for e in proposed or []])
        if self.verdict is None:
            return []
        return [ConflictDecision(new.entity_id, old.entity_id, self.verdict, "numeric", f"{old.value} vs {new.value}", 1.0)
                for old in graph.entities() if old.attribute == new.attribute and old.value != new.value]


def _memory(tmp_path, verdict="update", conflict=None, **cfg) -> tuple[MosaicMemory, FakeLLM, ScriptedDetector]:
    """A memory whose namespace "c" uses one ScriptedDetector (returned)."""
    llm = FakeLLM(responder)
    built: list[ScriptedDetector] = []

    def detector(llm):
        built.append(ScriptedDetector(llm, verdict, **(conflict or {})))
        return built[-1]

    mem = MosaicMemory(retry=None, llm=llm, embedder=BowEmbedder(), workdir=tmp_path, retrieval=partial(Retriever, mode="exact", top_k=5),
                       conflict=detector, **cfg)
    mem.stored_items("c")  # builds namespace "c" (and its detector)
    return mem, llm, built[-1]


def _add(mem, ns, turn_id, text, when="2023-05-08"):
    return mem.add(ns, [Turn(turn_id, "Ana", text)], session_time=when)


def test_protocols_are_implemented(tmp_path):
    mem, _, _ = _memory(tmp_path)
    assert isinstance(mem, MemorySystem) and isinstance(mem, Snapshottable) and isinstance(mem, Inspectable)


def test_gate_queues_hedged_contradiction_and_clarification_commits_it(tmp_path):
    mem, _, detector = _memory(tmp_path)
    _add(mem, "c", "D1:1", "I have two dogs.")
    report = _add(mem, "c", "D2:1", "Maybe we have four dogs?")
    assert report.stored == [] and len(report.queued) == 1 and detector.calls == 1  # the queued one never reached the detector
    [item] = mem.clarification_queue("c")
    assert item["entity"]["value"] == "4" and "'2'" in item["question"] and item["rho"] < 0.6
    resolved = mem.resolve_clarification("c", report.queued[0], confirmed=True)
    assert [e.verdict for e in resolved.updated] == ["update"] and mem.clarification_queue("c") == []
    assert [s.text for s in mem.stored_items("c")] == ["Ana has 4 dogs"]


def test_no_gate_commits_hedged_entity(tmp_path):
    mem, _, _ = _memory(tmp_path, gate=partial(ConfidenceGate, enabled=False))
    _add(mem, "c", "D1:1", "I have two dogs.")
    report = _add(mem, "c", "D2:1", "Maybe we have four dogs?")
    assert report.queued == [] and len(report.updated) == 1 and "belief" not in report.usage.by_purpose


def test_conflict_disabled_never_calls_a_detector(tmp_path):
    mem, _, detector = _memory(tmp_path, conflict={"enabled": False})
    _add(mem, "c", "D1:1", "I have two dogs.")
    report = _add(mem, "c", "D2:1", "We have three dogs now.")
    assert report.conflict_events == [] and "conflict" not in report.usage.by_purpose and detector.calls == 0
    assert len(mem.stored_items("c")) == 2 and "conflict" not in mem.metrics()


def test_costs_per_turn_and_failures_are_counted(tmp_path):
    mem, _, _ = _memory(tmp_path)
    report = mem.add("c", [Turn("D1:1", "Ana", "Hi!"), Turn("D1:2", "Ana", "I have two dogs."), Turn("D1:3", "Ana", "I work as a nurse.")])
    assert report.n_turns == 3 and report.usage.by_purpose["extraction"]["calls"] == 3
    cost = mem.cost_per_turn("c")
    assert cost["turns"] == 3 and cost["calls_per_turn"] == pytest.approx(1.0)
    assert cost["by_purpose_per_turn"]["extraction"]["prompt_tokens"] == pytest.approx(10.0)
    metrics = mem.metrics()
    assert metrics["write"]["committed"] == 2 and metrics["extraction"]["turns"] == 3 and "scorer" in metrics
    broken = MosaicMemory(retry=None, llm=FakeLLM(lambda m, s: "oops"), embedder=BowEmbedder(), workdir=tmp_path / "b", retrieval=partial(Retriever, mode="exact"))
    assert broken.add("c", [Turn("D1:1", "Ana", "I have two dogs.")]).failures == 1


def test_belief_abandoning_a_held_value_resolves_it_when_the_detector_misses(tmp_path):
    mem, _, _ = _memory(tmp_path, verdict=None)  # a detector whose check finds nothing
    _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    report = _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-08")
    [event] = report.updated
    assert event.conflict_type == "numeric" and event.reason.startswith("belief over 'Ana / number of dogs'")
    assert [s.text for s in mem.stored_items("c")] == ["Ana has 3 dogs"]
    off, _, _ = _memory(tmp_path / "off", verdict=None, conflict={"use_belief": False})
    _add(off, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    assert _add(off, "c", "D2:1", "We have three dogs now.", when="2023-06-08").conflict_events == []


def test_seed_skips_the_conflict_check_but_add_does_not(tmp_path):
    mem, _, detector = _memory(tmp_path, gate=partial(ConfidenceGate, enabled=False))  # the gate would queue a third competing value
    assert isinstance(mem, Seedable)
    mem.seed("c", [Turn("D1:1", "Ana", "I have two dogs.")], session_time="2023-05-08")
    seeded = mem.seed("c", [Turn("D1:2", "Ana", "We have three dogs now.")], session_time="2023-05-08")
    assert detector.calls == 0 and not (seeded.updated or seeded.flagged or seeded.rejected)
    assert sorted(s.text for s in mem.stored_items("c")) == ["Ana has 2 dogs", "Ana has 3 dogs"]  # both held, unjudged
    report = _add(mem, "c", "D2:1", "Maybe we have four dogs?", when="2023-06-08")
    assert detector.calls == 1 and {e.old_text for e in report.updated} == {"Ana has 2 dogs", "Ana has 3 dogs"}


def test_previous_turn_is_context_only_within_its_session(tmp_path):
    mem, llm, _ = _memory(tmp_path, extract=partial(EntityExtractor, context_chars=200))  # what conf/system/mosaic.yaml sets
    _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    _add(mem, "c", "D1:2", "I work as a nurse.", when="2023-05-08")
    _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-08")
    prompts = [r["messages"][-1]["content"] for r in llm.requests if r["purpose"] == "extraction"]
    assert "Previous message" not in prompts[0]
    assert "Previous message (Ana): I have two dogs." in prompts[1]  # same session: context for replies
    assert "Previous message" not in prompts[2]  # a new session does not answer the last one
    state = mem.snapshot("c")
    mem.restore("c", state)
    _add(mem, "c", "P:1", "I work as a nurse.", when="2024-01-01")  # e.g. a probe after a restored context
    assert "Previous message" not in [r for r in llm.requests if r["purpose"] == "extraction"][-1]["messages"][-1]["content"]


def test_fused_variant_shows_held_facts_and_hands_proposals_to_the_check(tmp_path):
    """extract.held_facts + conflict.judge=proposed: the second turn's extraction sees the held fact, its clash
    number reaches the detector as that held entity; the first turn (empty memory) shows none."""
    def fused(messages, schema):
        if "Memory:" in messages[-1]["content"]:
            assert "1. Ana has 2 dogs" in messages[-1]["content"]
            return {"facts": [{"fact": "Ana has 3 dogs", "type": "persona", "who": "Ana", "attr": "number of dogs", "value": "3",
                               "when": "", "cert": "stated", "spec": "exact", "clash": 1}]}
        return responder(messages, schema)

    built: list[ScriptedDetector] = []

    def detector(llm):
        built.append(ScriptedDetector(llm, "update", judge="proposed"))
        return built[-1]

    llm = FakeLLM(fused)
    mem = MosaicMemory(retry=None, llm=llm, embedder=BowEmbedder(), workdir=tmp_path, retrieval=partial(Retriever, mode="exact", top_k=5),
                       conflict=detector, extract=partial(EntityExtractor, held_facts=3))
    _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-08")
    held_id = mem.snapshot("c")["graph"]["entities"][0]["entity_id"]
    assert built[-1].proposed == [[], [held_id]]
    prompts = [r["messages"][-1]["content"] for r in llm.requests if r["purpose"] == "extraction"]
    assert "Memory:" not in prompts[0] and "Memory:" in prompts[1]


def test_judge_proposed_without_held_facts_is_refused():
    from mosaic.settings import combination_problems

    # the runner's validate() applies MosaicMemory.CONFIG_RULES to the system block, once, before any run folder
    assert MosaicMemory.CONFIG_RULES is combination_problems
    [problem] = combination_problems({"conflict": {"judge": "proposed"}})
    assert "needs system.extract.held_facts >= 1" in problem
    assert combination_problems({"conflict": {"judge": "proposed"}, "extract": {"held_facts": 2}}) == []


def test_exclusivity_check_keeps_compatible_values_held_side_by_side(tmp_path):
    """When the belief call says the values can all be true, the belief does not supersede the held one."""

    def compatible(messages, schema):
        if messages[0]["content"].startswith("You judge"):
            assert list(schema["properties"]) == ["exclusive", "probabilities"]
            return {"exclusive": False, "probabilities": [0.2, 0.8]}
        return responder(messages, schema)

    llm = FakeLLM(compatible)
    mem = MosaicMemory(retry=None, llm=llm, embedder=BowEmbedder(), workdir=tmp_path, retrieval=partial(Retriever, mode="exact", top_k=5),
                       conflict=lambda llm: ScriptedDetector(llm, None), gate=partial(ConfidenceGate, exclusivity_check=True))
    _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    report = _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-08")
    assert report.conflict_events == [] and report.queued == []
    assert sorted(s.text for s in mem.stored_items("c")) == ["Ana has 2 dogs", "Ana has 3 dogs"]
    assert report.usage.by_purpose["belief"]["calls"] == 1 and mem.gate.stats["not_exclusive"] == 1
