"""What a MOSAIC namespace saves and reads back (mosaic/namespace.py): snapshot, restore, reload from disk,
and a store written before turn texts were kept."""

from __future__ import annotations

from tests.unit.mosaic.test_memory import _add, _memory
from tests.unit.mosaic.test_search_hits import _provenance_memory


def test_snapshot_restore_and_reload_from_disk(tmp_path):
    mem, _, _ = _memory(tmp_path)
    _add(mem, "c", "D1:1", "I have two dogs.")
    _add(mem, "c", "D1:2", "I work as a nurse.")
    snap = mem.snapshot("c")
    _add(mem, "c", "D2:1", "We have three dogs now.")
    assert sorted(s.text for s in mem.stored_items("c")) == ["Ana has 3 dogs", "Ana works as a nurse"]
    mem.restore("c", snap)
    assert sorted(s.text for s in mem.stored_items("c")) == ["Ana has 2 dogs", "Ana works as a nurse"]
    assert [h.text for h in mem.search("c", "Ana dogs", k=1)] == ["Ana has 2 dogs"]
    again, _, _ = _memory(tmp_path)  # same workdir: loads the persisted namespace
    assert sorted(s.text for s in again.stored_items("c")) == ["Ana has 2 dogs", "Ana works as a nurse"]
    again.reset("c")
    assert again.stored_items("c") == [] and not (tmp_path / "mosaic" / "c.json").exists()


def test_a_store_written_before_provenance_loads_without_turns(tmp_path):
    mem = _provenance_memory(tmp_path, on=True)
    _add(mem, "c", "D1:1", "I work as a nurse.")
    state = mem.snapshot("c")
    del state["turns"]
    mem.restore("c", state)
    assert mem.search("c", "job?", 3)[0].text == "Ana works as a nurse"  # no turn text known: entity only
