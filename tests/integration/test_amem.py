"""A-Mem (a-mem 0.2.6) through its adapter with the real local LLM: a LoCoMo slice and conflict probes.

Needs the ``baselines`` extra. Uses the default 1.5B model, what `system=amem` runs with: the 0.5B
model loops inside A-Mem's JSON fields until the token cap.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.baseline_probes import PROBES, locomo_slice, run_mini_suite
from core.api import Turn

pytestmark = [pytest.mark.integration, pytest.mark.baselines_live]

REPO = Path(__file__).resolve().parents[2]
N_TURNS = 3


@pytest.fixture(scope="module")
def amem_system(default_llm, embedder, tmp_path_factory):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "conf/system/amem.yaml")  # the config `system=amem` runs
    return instantiate(cfg, llm=default_llm, embedder=embedder, workdir=str(tmp_path_factory.mktemp("amem")))


def test_locomo_slice_is_stored_searchable_and_metered(amem_system):
    turns, when = locomo_slice(N_TURNS)
    amem_system.reset("conv-0")
    report = amem_system.add("conv-0", turns, session_time=when)

    assert report.n_turns == N_TURNS
    assert [s.source_turn_ids for s in report.stored] == [[t.turn_id] for t in turns]  # one note per turn
    held = {item.memory_id: item for item in amem_system.stored_items("conv-0")}
    assert set(held) == {s.memory_id for s in report.stored}
    # per turn: one analysis call; one evolution call once there are neighbours (not for the first note)
    assert report.usage.by_purpose["amem.analyze"]["calls"] == N_TURNS
    assert report.usage.by_purpose["amem.evolution"]["calls"] == N_TURNS - 1
    assert report.usage.prompt_tokens > 0 and report.usage.completion_tokens > 0

    # Whether the 1.5B model's evolution rewrites a note of this slice is the model's call (none did in CI), so an
    # event check here could pass on an empty list; that an evolution becomes an event naming the rewritten note is
    # checked with a fake LLM that always evolves (tests/unit/baselines/test_amem_mapping.py), and the probes below
    # check, live, that the report lists a rewritten held note exactly when A-Mem rewrote it.
    assert len(report.updated) <= N_TURNS - 1  # at most one evolution per note that had neighbours

    hits = amem_system.search("conv-0", "What did Caroline go to yesterday?", k=3)
    assert len(hits) == 3
    assert all(h.memory_id in held and h.timestamp == when for h in hits)
    assert all(h.text == held[h.memory_id].text for h in hits)  # content fetched with read(id)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_conflict_probes_report_evolution_of_the_held_note(amem_system):
    n_events = 0
    for n, (held_fact, contradiction) in enumerate(PROBES):
        namespace = f"probe-{n}"
        amem_system.reset(namespace)
        amem_system.add(namespace, [Turn(f"P{n}:1", "user", held_fact)], session_time="2024-01-10T10:00:00")
        space = amem_system._spaces[namespace]
        old_id = next(iter(space.turn_ids))
        before = space.system.read(old_id)
        old_context, old_tags = str(before.context), list(before.tags)
        report = amem_system.add(namespace, [Turn(f"P{n}:2", "user", contradiction)], session_time="2024-03-02T10:00:00")
        after = space.system.read(old_id)
        changed = (str(after.context), list(after.tags)) != (old_context, old_tags)
        # the report says the held note was rewritten exactly when A-Mem really rewrote it
        assert [e.old_memory_id for e in report.updated] == ([old_id] if changed else [])
        assert len(report.stored) == 1 and report.stored[0].source_turn_ids == [f"P{n}:2"]
        hits = amem_system.search(namespace, held_fact, k=2)
        assert {h.source_turn_ids[0] for h in hits} == {f"P{n}:1", f"P{n}:2"}
        n_events += len(report.updated)
    assert n_events <= len(PROBES)  # one held note per probe: at most one rewrite each


def test_conflict_experiment_runs_suite_cases_from_one_ingest(default_llm, embedder, amem_system, tmp_path):
    metrics, rows = run_mini_suite(amem_system, default_llm, embedder, tmp_path)
    # per probe: A-Mem's analysis, then evolution against the restored context's notes
    assert all(row["llm_calls_by_purpose"] == {"amem.analyze": 1, "amem.evolution": 1} for row in rows.values())
    assert len(rows) == 2 and all(isinstance(row["events"], list) for row in rows.values())
    # Whether the 1.5B model's evolution rewrites a held note on these two probes is the model's call (none did in
    # CI), so a check over its events could pass on an empty list and is not made here: that an evolution becomes an
    # event naming the held note's turns is checked with a fake LLM that always evolves
    # (tests/unit/baselines/test_amem_mapping.py::test_adapter_reports_stored_notes_and_evolution_of_existing_notes).
    # What the live run does promise: a probe counts as detected (strict or lenient) only with an event behind it.
    assert all(bool(row["events"]) or not (row["detected_strict"] or row["detected_lenient"]) for row in rows.values())
