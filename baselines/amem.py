"""A-Mem (PyPI ``a-mem`` 0.2.6, ``agentic_memory.AgenticMemorySystem``) behind the MemorySystem protocol.

``a-mem`` 0.2.6 is a third-party packaging of the A-Mem first author's extended repository,
not the official agiresearch code (which is not on PyPI); see docs/baselines.md. The library
runs for real: per turn it asks the LLM to analyse the note (keywords, context, tags), then
runs memory evolution against the 5 nearest notes, which may link the new note to them
("strengthen") and rewrite their context and tags ("update_neighbor"). The latter changes
existing memories, so each neighbour whose context or tags actually changed is reported as an
``update`` event in the AddReport (reason says it is A-Mem evolution, not a contradiction verdict).

The LLM is the harness endpoint, reached through A-Mem's OpenAI backend with
``OPENAI_BASE_URL``/``OPENAI_API_KEY`` set only while the client is built; the embedder is
the harness's local MiniLM folder; each namespace has its own ChromaDB folder under the run, so
``run.workers`` namespaces are written at once (shared bookkeeping under a lock, each call labelled and
metered in its own thread: ``LibraryLLMTap``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from core.llm import retry_policy
from core.atomic import write_json_atomic
from core.api import AddReport, ConflictEvent, Retrieved, StoredItem, Turn
from core.paths import file_safe_name

from core.llm.library_tap import LibraryLLMTap

log = logging.getLogger(__name__)


@dataclass
class NeighbourUpdate:
    """One ``update`` call that A-Mem's evolution made on an existing note, with the note as it was."""

    memory_id: str
    old_content: str
    old_context: str
    old_tags: list[str]
    changes: dict[str, Any]
    old_turn_ids: list[str] = field(default_factory=list)


def evolution_to_events(new_text: str, new_turn_ids: list[str], updates: list[NeighbourUpdate]) -> list[ConflictEvent]:
    """Neighbours whose context or tags A-Mem really rewrote become ``update`` events.

    A-Mem asks the LLM for new context/tags for *every* neighbour and writes them back even
    when they equal the old ones, so unchanged rewrites are not counted.
    """
    events: list[ConflictEvent] = []
    for update in updates:
        changed = []
        if "context" in update.changes and update.changes["context"] != update.old_context:
            changed.append("context")
        if "tags" in update.changes and list(update.changes["tags"] or []) != list(update.old_tags or []):
            changed.append("tags")
        if not changed:
            continue
        events.append(
            ConflictEvent(
                new_text=new_text,
                old_text=update.old_content,
                verdict="update",
                reason=f"a-mem evolution (update_neighbor): rewrote {' and '.join(changed)} of a held note",
                new_source_turn_ids=list(new_turn_ids),
                old_source_turn_ids=list(update.old_turn_ids),
                old_memory_id=update.memory_id,
            )
        )
    return events


def note_content(turn: Turn) -> str:
    """A-Mem's own LoCoMo script stores each turn as "Speaker <name> says : <text>"."""
    return f"Speaker {turn.speaker} says : {turn.text}"


_NOTE_ID_NAMESPACE = uuid.UUID("5b0f6a4e-2d0c-4c55-9a38-4f0b8f1d2a71")


def note_id_for(namespace: str, turn: Turn, n_held: int) -> str:
    """A reproducible uuid for the note of ``turn`` (A-Mem would draw a random uuid4).

    A-Mem's evolution prompt lists the neighbouring notes by id, so random ids make every prompt
    new: reruns would never hit the LLM cache (no resume after a kill) and would differ at
    temperature 0. The count of notes already held keeps ids unique if a turn is written twice.
    """
    return str(uuid.uuid5(_NOTE_ID_NAMESPACE, f"{namespace}\x00{turn.turn_id}\x00{n_held}"))


@contextmanager
def _temporary_env(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@dataclass
class _Space:
    system: Any
    path: Path
    turn_ids: dict[str, list[str]]  # note id -> source turn ids (A-Mem notes carry no free metadata)
    updates: list[NeighbourUpdate] = field(default_factory=list)
    analysis_failures: int = 0

    def save(self) -> None:
        write_json_atomic(self.path / "turn_ids.json", self.turn_ids)


@dataclass(frozen=True)
class AMemSnapshot:
    """One namespace's notes as ChromaDB holds them (ids, stored embeddings, documents, metadata)."""

    ids: list[str]
    embeddings: list[list[float]]
    documents: list[str]
    metadatas: list[dict[str, Any]]
    turn_ids: dict[str, list[str]]
    evolution_count: int


class AMemMemory:
    """One ``AgenticMemorySystem`` (own ChromaDB folder) per namespace; one note per turn."""

    parallel_namespaces = True  # everything a write changes is the namespace's own (its system, folder, sidecar)

    def __init__(
        self,
        llm: Any,
        embedder: Any,
        workdir: str,
        temperature: float | None = 0.0,
        name: str = "amem",
        *,
        # output guard: no defaults, conf/system/amem.yaml decides (tests/unit/repo/test_code_defaults.py)
        max_tokens: int | None,
        retry: Any,
        max_items: int | None,
    ) -> None:
        if max_items is not None and int(max_items) < 1:
            raise ValueError(f"system.max_items={max_items} must be >= 1 (or null: A-Mem's schemas unchanged)")
        self.llm = llm
        self.embedder = embedder
        self.workdir = Path(workdir)
        self.store_dir = self.workdir / "amem"
        self.name = name
        # output guard (conf/system/amem.yaml): the token cap (A-Mem sends none), maxItems on the lists of A-Mem's
        # json_schema outputs, and a reply cut off or not JSON asked again as `retry` says
        self.max_tokens = max_tokens
        self.retry = retry_policy(retry)
        self.max_items = max_items
        self.tap = LibraryLLMTap(
            "a-mem", llm, purpose="amem.analyze", temperature=temperature, max_tokens=max_tokens, retry=self.retry, max_items=max_items
        )
        self._spaces: dict[str, _Space] = {}
        self._lock = threading.RLock()  # building a space (it sets process environment variables) and the counters
        self.failed_steps = 0  # A-Mem LLM steps (analysis, evolution) that failed; the note is stored regardless

    # -- library ----------------------------------------------------------------------
    def _space(self, namespace: str) -> _Space:
        space = self._spaces.get(namespace)
        if space is not None:
            return space
        with self._lock:
            if namespace not in self._spaces:
                self._spaces[namespace] = self._new_space(namespace)
            return self._spaces[namespace]

    def _new_space(self, namespace: str) -> _Space:
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm would fetch a price list at import
        os.environ["ANONYMIZED_TELEMETRY"] = "False"  # ChromaDB's telemetry
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from agentic_memory.memory_system import AgenticMemorySystem

        path = self.store_dir / file_safe_name(namespace)
        path.mkdir(parents=True, exist_ok=True)
        with _temporary_env({"OPENAI_BASE_URL": self.llm.api_base, "OPENAI_API_KEY": self.llm.api_key}):
            system = AgenticMemorySystem(
                model_name=_embedder_dir(self.embedder),
                llm_backend="openai",
                llm_model=self.llm.model_id,
                storage_path=str(path / "chroma"),
            )
        sidecar = path / "turn_ids.json"
        space = _Space(system, path, json.loads(sidecar.read_text()) if sidecar.exists() else {})
        self.tap.install(system.llm_controller.llm.client)
        self._instrument(space)
        return space

    def _instrument(self, space: _Space) -> None:
        """Label LLM calls by A-Mem stage and record every evolution write to an existing note."""
        system = space.system
        analyze, evolve, update = system.analyze_content, system.process_memory, system.update

        def analyze_content(content: str) -> dict:
            self.tap.purpose = "amem.analyze"
            calls_before = self.tap.usage.calls
            analysis = analyze(content)
            if self.tap.usage.calls > calls_before and not _is_json_object(self.tap.last_text):
                space.analysis_failures += 1  # A-Mem prints the error and falls back to empty metadata
            return analysis

        def process_memory(note: Any) -> Any:
            self.tap.purpose = "amem.evolution"
            return evolve(note)

        def update_note(memory_id: str, **changes: Any) -> bool:
            held = system.read(memory_id)
            if held is not None:
                space.updates.append(
                    NeighbourUpdate(
                        memory_id=memory_id,
                        old_content=str(held.content),
                        old_context=str(held.context),
                        old_tags=list(held.tags or []),
                        changes=dict(changes),
                        old_turn_ids=list(space.turn_ids.get(memory_id, [])),
                    )
                )
            return update(memory_id, **changes)

        system.analyze_content = analyze_content
        system.process_memory = process_memory
        system.update = update_note

    def run_metadata(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "library": "a-mem",
            "library_version": version("a-mem"),
            "packaging": "third-party PyPI packaging of the A-Mem first author's extended repository",
            "search_mode": "semantic (ChromaDB top-k, no linked-neighbour expansion)",
            "output_guard": {"max_tokens": self.max_tokens, "max_items": self.max_items, "retry_attempts": self.retry.attempts,
                             "retry_temperature": self.retry.temperature, "retry_seed": self.retry.seed},
        }

    def metrics(self) -> dict[str, Any]:
        """What the output guard did (the tap's counts) and how many A-Mem LLM steps failed (``AddReport.failures``
        counts the turns that had one; their notes are stored with whatever A-Mem fell back to)."""
        return {"output_guard": self.tap.guard_counts(), "failed_llm_steps": self.failed_steps}

    # -- MemorySystem -----------------------------------------------------------------
    def reset(self, namespace: str) -> None:
        space = self._space(namespace)
        collection = space.system.retriever.collection
        ids = collection.get()["ids"]
        if ids:
            collection.delete(ids=ids)
        space.system.cache.clear()
        space.turn_ids.clear()
        space.updates.clear()
        space.save()

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        space = self._space(namespace)
        report = AddReport(n_turns=len(turns))
        with self.tap.scoped() as meter:  # this add's calls only, whatever other namespaces do meanwhile
            self._add_notes(namespace, space, turns, session_time, report)
        report.usage = meter.snapshot()
        return report

    def _add_notes(self, namespace: str, space: _Space, turns: list[Turn], session_time: str | None, report: AddReport) -> None:
        for turn in turns:
            content = note_content(turn)
            space.updates.clear()
            failures_before = _SwallowedErrors.install().here() + space.analysis_failures
            note_id = space.system.add_note(
                content, time=turn.session_time or session_time, id=note_id_for(namespace, turn, len(space.turn_ids))
            )
            space.turn_ids[note_id] = [turn.turn_id]
            space.save()
            report.stored.append(StoredItem(note_id, content, [turn.turn_id]))
            report.updated.extend(evolution_to_events(content, [turn.turn_id], space.updates))
            failed_steps = _SwallowedErrors.install().here() + space.analysis_failures - failures_before
            with self._lock:
                self.failed_steps += failed_steps
            report.failures += int(failed_steps > 0)  # AddReport.failures counts failed turns in every system

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        space = self._space(namespace)
        if k <= 0 or space.system.retriever.count() == 0:
            return []
        found: list[Retrieved] = []
        for hit in space.system.search(query, k):
            note = space.system.read(hit["id"])  # search results carry ids; the text comes from read()
            if note is None:
                continue
            distance = float(hit.get("score") or 0.0)
            found.append(
                Retrieved(
                    text=str(note.content),
                    score=1.0 / (1.0 + distance),  # ChromaDB returns a distance; higher is better here
                    timestamp=str(note.timestamp) if note.timestamp else None,
                    source_turn_ids=list(space.turn_ids.get(hit["id"], [])),
                    memory_id=str(hit["id"]),
                )
            )
        return found

    # -- Snapshottable ----------------------------------------------------------------
    def snapshot(self, namespace: str) -> AMemSnapshot:
        """The namespace's notes as stored, embeddings included (the conflict suite branches per probe from it).

        Cheaper than re-ingesting, which replays every add (from the LLM cache, see ``note_id_for``) and
        re-embeds every note.
        """
        space = self._space(namespace)
        held = space.system.retriever.collection.get(include=["embeddings", "documents", "metadatas"])
        return AMemSnapshot(
            ids=list(held["ids"]),
            embeddings=[list(map(float, vector)) for vector in held["embeddings"]],
            documents=list(held["documents"]),
            metadatas=[dict(meta or {}) for meta in held["metadatas"]],
            turn_ids={note_id: list(ids) for note_id, ids in space.turn_ids.items()},
            evolution_count=int(space.system.evo_cnt),
        )

    def restore(self, namespace: str, state: AMemSnapshot) -> None:
        """Replace the namespace's notes with the snapshot's (same ids, stored embeddings, no re-analysis)."""
        self.reset(namespace)
        space = self._space(namespace)
        if state.ids:
            space.system.retriever.collection.add(
                ids=state.ids, embeddings=state.embeddings, documents=state.documents, metadatas=state.metadatas
            )
        space.turn_ids.update({note_id: list(ids) for note_id, ids in state.turn_ids.items()})
        space.system.evo_cnt = state.evolution_count
        space.save()

    # -- Inspectable ------------------------------------------------------------------
    def stored_items(self, namespace: str) -> list[StoredItem]:
        space = self._space(namespace)
        held = space.system.retriever.collection.get()
        return [
            StoredItem(note_id, str((meta or {}).get("content", "")), list(space.turn_ids.get(note_id, [])))
            for note_id, meta in zip(held["ids"], held["metadatas"])
        ]


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (json.JSONDecodeError, TypeError):
        return False


class _SwallowedErrors(logging.Handler):
    """Counts ERROR records of A-Mem's module logger: its only trace of an evolution step that failed
    (bad JSON, missing keys) and was skipped. Counted per thread (A-Mem logs from the thread that called it,
    and namespaces are written from several at once); callers take differences of ``here()``."""

    _instance: "_SwallowedErrors | None" = None
    _install_lock = threading.Lock()

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.count = 0
        self._by_thread: dict[int, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self._by_thread[record.thread or 0] = self._by_thread.get(record.thread or 0, 0) + 1

    def here(self) -> int:
        """ERROR records logged so far from the calling thread."""
        return self._by_thread.get(threading.get_ident(), 0)

    @classmethod
    def install(cls) -> "_SwallowedErrors":
        with cls._install_lock:
            if cls._instance is not None:
                return cls._instance
            cls._instance = cls()
            logging.getLogger("agentic_memory.memory_system").addHandler(cls._instance)
        return cls._instance


def _embedder_dir(embedder: Any) -> str:
    """The harness embedder's local model folder (the packaged all-MiniLM-L6-v2 by default)."""
    path = getattr(embedder, "model_path", None)
    if path and Path(path).exists():
        return str(path)
    from core.embed import packaged_model_dir

    return str(packaged_model_dir())
