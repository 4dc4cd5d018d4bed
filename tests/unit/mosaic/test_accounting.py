"""mosaic.accounting: the cost rows of a write group and the totals a reset namespace leaves behind.

The whole path through MosaicMemory (metrics names and values across restores and resets) is
tests/unit/mosaic/test_mechanisms.py::test_counts_stay_whole_across_restores_and_resets; these pin the accounting's own rules."""

from __future__ import annotations

from types import SimpleNamespace

from core.api import AddReport, LLMUsage, StoredItem, Turn
from mosaic.accounting import MosaicAccounting, Work


def _group_report() -> AddReport:
    usage = LLMUsage(calls=2, prompt_tokens=30, completion_tokens=8, by_purpose={"extraction": {"calls": 2, "prompt_tokens": 30, "completion_tokens": 8}})
    stored = [StoredItem("e1", "Ana has 2 dogs", ["D1:1"]), StoredItem("e2", "Ana lives in Oslo", ["D1:2"]), StoredItem("e3", "x", ["D1:2"])]
    return AddReport(stored=stored, usage=usage, n_turns=2)


def test_a_group_books_its_calls_and_seconds_on_its_last_turn_and_its_entities_on_their_own():
    turns = [Turn("D1:1", "Ana", "I have two dogs."), Turn("D1:2", "Ana", "We live in Oslo.")]
    extractions = [SimpleNamespace(entities=[object()]), SimpleNamespace(entities=[object(), object()])]
    first, last = MosaicAccounting.cost_rows(turns, extractions, _group_report(), seconds=1.5)
    assert (first["seconds"], first["usage"]["calls"], first["entities"], first["stored"]) == (0.0, 0, 1, 1)
    assert (last["seconds"], last["usage"]["calls"], last["entities"], last["stored"]) == (1.5, 2, 2, 2)
    assert first["group"] == last["group"] == ["D1:1", "D1:2"]


def test_a_single_turn_counts_every_stored_item_and_has_no_group():
    [row] = MosaicAccounting.cost_rows([Turn("D1:1", "Ana", "hi")], [SimpleNamespace(entities=[])], _group_report(), seconds=0.25)
    assert row["stored"] == 3 and "group" not in row and row["usage"]["by_purpose"]["extraction"]["calls"] == 2


def _space(rows: list[dict]) -> SimpleNamespace:
    """A namespace as Work.of reads it: parts with stats, a scan histogram, cost rows."""
    return SimpleNamespace(
        scorer=SimpleNamespace(stats={"writes": 3, "drift": []}), communities=SimpleNamespace(stats={"leiden_runs": 1}),
        retriever=SimpleNamespace(stats={"queries": 2}, scan_histogram={4: 2}, mode="exact"), detector=None,
        cost_log=rows, restored_from=None, queue=[], rejected=[], turns={},
        graph=SimpleNamespace(entities=lambda include_inactive=False: []),
    )  # fmt: skip


def test_a_retired_namespace_still_counts_in_the_totals():
    accounting = MosaicAccounting()
    row = MosaicAccounting.cost_rows([Turn("D1:1", "Ana", "hi")], [SimpleNamespace(entities=[])], _group_report(), seconds=1.0)
    gone, live = _space(list(row)), _space(list(row))
    accounting.retire(gone)
    assert accounting.cost_per_turn({"b": live})["turns"] == 2 and accounting.cost_per_turn({"b": live}, "b")["turns"] == 1
    counts = accounting.mechanism_counts({"b": live})
    assert counts["ncs"]["writes"] == 6 and counts["leiden_reruns"] == 2 and counts["retrieval"]["queries"] == 4
    assert counts["retrieval"]["candidates_scanned"] == {"queries": 4, "mean": 4.0, "p95": 4, "max": 4}
    assert Work.of(live).since(Work.of(live)).cost_log == []


def test_run_metadata_names_the_oracle_row():
    assert MosaicAccounting.run_metadata("oracle") == {"row_label": "MOSAIC with the oracle extractor", "extraction_source": "oracle"}
    assert MosaicAccounting.run_metadata("model") == {"extraction_source": "model"}
