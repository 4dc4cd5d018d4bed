"""Persistent store: round trip, crash mid-write keeps the previous state, damaged files fail clearly."""

from __future__ import annotations

import json
import os

import pytest

from mosaic.entity import Entity
from mosaic.graph import MemoryGraph
from mosaic.store import MemoryStore, MemoryStoreError
from tests.unit.mosaic.test_graph import BowEmbedder


def _state(value: str) -> dict:
    graph = MemoryGraph(BowEmbedder())
    graph.add_entity(Entity("kids", f"Ana has {value} kids", "persona", "Ana", "number of kids", value,
                            evidence=f"I have {value} kids", source_turn_ids=["D1:3"], session_time="2023-05-08T13:56:00",
                            confidence=0.9, belief={value: 1.0}, history=[{"value": "1", "reason": "had another"}]))
    graph.add_entity(Entity("job", "Ana is a nurse", "persona", "Ana", "job", "nurse", source_turn_ids=["D1:4"]))
    return {"graph": graph.to_dict(), "queue": [], "cost_log": [], "last_turn": None}


def test_round_trip_keeps_every_field(tmp_path):
    store = MemoryStore(tmp_path / "mem.json")
    state = _state("2")
    store.save(state)
    loaded = store.load()
    assert loaded == json.loads(json.dumps(state))
    graph = MemoryGraph.from_dict(loaded["graph"], BowEmbedder())
    kids = graph.entity("kids")
    assert (kids.value, kids.confidence, kids.session_time, kids.source_turn_ids, kids.evidence, kids.belief) == (
        "2", 0.9, "2023-05-08T13:56:00", ["D1:3"], "I have 2 kids", {"2": 1.0})
    assert kids.history == [{"value": "1", "reason": "had another"}]


def test_crash_before_rename_leaves_previous_state(tmp_path, monkeypatch):
    store = MemoryStore(tmp_path / "mem.json")
    store.save(_state("2"))

    def crash(src, dst):
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        store.save(_state("3"))
    monkeypatch.undo()
    assert store.load()["graph"]["entities"][0]["value"] == "2"
    assert [p.name for p in tmp_path.iterdir()] == ["mem.json"]  # no temp file left behind


def test_crash_during_write_of_temp_file_leaves_previous_state(tmp_path, monkeypatch):
    store = MemoryStore(tmp_path / "mem.json")
    store.save(_state("2"))
    real_fsync = os.fsync

    def crash_on_fsync(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", crash_on_fsync)
    with pytest.raises(OSError, match="disk gone"):
        store.save(_state("3"))
    monkeypatch.setattr(os, "fsync", real_fsync)
    # a torn temp file from a killed process (no cleanup at all) is ignored as well
    (tmp_path / ".mem.json.abc.tmp").write_text('{"schema": 1, "checks')
    assert store.load()["graph"]["entities"][0]["value"] == "2"


def test_truncated_file_fails_naming_the_file(tmp_path):
    path = tmp_path / "mem.json"
    MemoryStore(path).save(_state("2"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MemoryStoreError, match=r"mem\.json.*truncated or corrupt"):
        MemoryStore(path).load()


def test_altered_file_fails_its_checksum(tmp_path):
    path = tmp_path / "mem.json"
    MemoryStore(path).save(_state("2"))
    doc = json.loads(path.read_text())
    doc["state"]["graph"]["entities"][0]["value"] = "7"
    path.write_text(json.dumps(doc))
    with pytest.raises(MemoryStoreError, match="checksum"):
        MemoryStore(path).load()


def test_invalid_state_is_refused_on_save_and_missing_file_is_clear(tmp_path):
    state = _state("2")
    del state["graph"]["entities"][0]["belief"]
    with pytest.raises(MemoryStoreError, match=r"'kids' lacks fields \['belief'\]"):
        MemoryStore(tmp_path / "mem.json").save(state)
    state = _state("2")
    state["graph"]["entities"][0]["belief"] = {"2": 0.5}
    with pytest.raises(MemoryStoreError, match="sums to 0.5"):
        MemoryStore(tmp_path / "mem.json").save(state)
    with pytest.raises(MemoryStoreError, match="does not exist"):
        MemoryStore(tmp_path / "nope.json").load()


def test_file_safe_name_keeps_one_path_component():
    from core.paths import file_safe_name

    assert file_safe_name("conv-26/Caroline Smith") == "conv-26_Caroline_Smith"
    assert file_safe_name("../x") == ".._x" and "/" not in file_safe_name("a//b")
    assert file_safe_name("") == "default"
