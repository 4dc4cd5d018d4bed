"""research/error_analysis.py: each question rag gets right and MOSAIC wrong lands in exactly one class,
read from MOSAIC's persisted memory and the two runs' row files (invented data)."""

from __future__ import annotations

import json
from pathlib import Path

from mosaic.store import MemoryStore
from research.error_analysis import main


def _entity(entity_id: str, text: str, turns: list[str], status: str = "active", history: list | None = None) -> dict:
    return {"entity_id": entity_id, "text": text, "type": "event", "value": "", "confidence": 0.9, "session_time": None,
            "source_turn_ids": turns, "evidence": "", "belief": {}, "history": history or [], "status": status}


def _run(folder: Path, outcomes: dict[str, tuple[bool, list[str]]]) -> Path:
    """A run folder: predictions (evidence D<n>:1 for question n, retrieved turn ids as given) and judgements."""
    folder.mkdir(parents=True)
    with open(folder / "predictions.jsonl", "w") as p, open(folder / "judgements.jsonl", "w") as j:
        for key, (correct, retrieved) in outcomes.items():
            n = key.split("q")[-1]
            p.write(json.dumps({"key": key, "sample_id": "conv-x", "category": 4, "question": f"q{n}?", "gold": "g",
                                "evidence": [f"D{n}:1"], "prediction": "p", "retrieved_turn_ids": retrieved}) + "\n")
            j.write(json.dumps({"key": key, "label": "CORRECT" if correct else "WRONG", "correct": correct}) + "\n")
    return folder


def test_each_class_is_found(tmp_path, capsys):
    keys = [f"conv-x:q{n}" for n in range(1, 7)]
    rag = _run(tmp_path / "rag", {k: (n != 6, []) for n, k in enumerate(keys, 1)})
    mosaic = _run(tmp_path / "mosaic", {keys[0]: (False, []), keys[1]: (False, []), keys[2]: (False, ["D9:9"]),
                                        keys[3]: (False, ["D4:1"]), keys[4]: (True, ["D5:1"]), keys[5]: (True, [])})
    state = {
        "graph": {"entities": [
            _entity("a", "superseded fact", ["D2:1"], status="superseded"),
            _entity("b", "held fact", ["D3:1"]),
            _entity("c", "retrieved fact", ["D4:1"]),
            _entity("d", "new value", ["D7:1"], history=[{"text": "old value", "source_turn_ids": ["D8:1"]}]),
        ]},
        "queue": [],
        # no "rejected" and no "turns": a memory written by older code
    }
    MemoryStore(mosaic / "system" / "mosaic" / "locomo_conv-x.json").save(state)
    result = main([str(mosaic), str(rag)])
    assert result["counts"] == {"never_extracted": 1, "gated_or_superseded": 1, "stored_not_retrieved": 1, "retrieved_answered_wrong": 1}
    assert [e["key"] for e in result["examples"]["never_extracted"]] == [keys[0]]
    assert result["tally"] == {"questions": 6, "rag_correct": 5, "mosaic_correct": 2, "both_correct": 1, "mosaic_only": 1,
                               "no_gold_evidence": 0, "unjudged": 0, "rag_only": 4}
    assert "| evidence never extracted | 1 |" in (mosaic / "error_analysis.md").read_text()
    assert json.loads((mosaic / "error_analysis.json").read_text())["counts"] == result["counts"]
    assert "retrieved but answered wrong" in capsys.readouterr().out


def test_an_earlier_version_or_a_queued_entity_counts_as_extracted(tmp_path):
    rag = _run(tmp_path / "rag", {"conv-x:q8": (True, []), "conv-x:q5": (True, [])})
    mosaic = _run(tmp_path / "mosaic", {"conv-x:q8": (False, []), "conv-x:q5": (False, [])})
    state = {"graph": {"entities": [_entity("d", "new value", ["D7:1"], history=[{"text": "old value", "source_turn_ids": ["D8:1"]}])]},
             "queue": [{"entity": _entity("q", "hedged", ["D5:1"], status="queued")}]}
    MemoryStore(mosaic / "system" / "mosaic" / "locomo_conv-x.json").save(state)
    assert main([str(mosaic), str(rag), "--out", str(tmp_path / "out")])["counts"]["gated_or_superseded"] == 2


def test_evidence_reach_places_every_question_and_names_the_write_path_causes(tmp_path):
    """Each question with evidence lands in one reach class; exact cosine ranking splits the held-not-retrieved ones."""
    import base64

    from research.error_analysis import evidence_reach
    from tests.fakes import HashEmbedder

    embedder = HashEmbedder(dim=256)
    run = tmp_path / "mosaic"
    run.mkdir()
    questions = {1: ("where did ann hike", ["D1:1"]), 2: ("what pet does bob keep", []), 3: ("what car does cid drive", []),
                 4: ("what is dee's hobby", []), 5: ("when did eve move", [])}
    with open(run / "predictions.jsonl", "w") as out:
        for n, (question, retrieved) in questions.items():
            out.write(json.dumps({"key": f"conv-x:q{n}", "sample_id": "conv-x", "question": question, "evidence": [f"D{n}:1"],
                                  "prediction": "p", "retrieved_turn_ids": retrieved}) + "\n")
    superseded = _entity("s", "dee paints", ["D4:1"], status="superseded",
                         history=[{"event": "superseded", "by": "x", "reason": "belief over 'dee / hobby' moved from 'painting' to 'pottery' (p=0.95)"}])
    superseded["attribute"] = "hobby"
    entities = [_entity("a", "ann hiked the alps", ["D1:1"]), _entity("b", "what pet does bob keep", ["D2:1"]),
                _entity("c", "cid bought a red thing", ["D3:1"]), _entity("z", "what car does cid drive daily", ["D9:1"]), superseded]
    vectors = {e["entity_id"]: base64.b64encode(embedder.encode([e["text"]])[0].tobytes()).decode() for e in entities}
    queued = _entity("q", "dee likes clay", ["D6:1"], status="queued")
    queued["attribute"] = "hobby"
    state = {"graph": {"entities": entities, "vectors": vectors},
             "queue": [{"entity": queued, "reason": "belief entropy 0.98 bits > delta 0.8"}]}
    MemoryStore(run / "system" / "mosaic" / "locomo_conv-x.json").save(state)

    reach = evidence_reach(run, embedder.encode, top_k=1)
    assert reach["counts"] == {"retrieved": 1, "held_not_retrieved": 2, "held_not_retrieved_exact_top_k": 1,
                               "held_not_retrieved_exact_lower": 1, "gated_or_superseded_only": 1, "never_extracted": 1}
    assert reach["superseded_by"] == {"slot belief": 1} and reach["superseded_attributes"] == [["hobby", 1]]
    assert reach["queued_because"] == {"belief entropy > delta": 1} and reach["queued_attributes"] == [["hobby", 1]]
    without_model = evidence_reach(run, None, top_k=1)
    assert "held_not_retrieved_exact_top_k" not in without_model["counts"] and without_model["counts"]["held_not_retrieved"] == 2
