"""Mem0 (PyPI ``mem0ai`` 2.x, open-source ``Memory``) behind the harness's MemorySystem protocol.

The library runs for real: its own extraction prompt and pipeline, its FAISS vector store and
SQLite history under the run folder, the harness's LLM endpoint (provider ``vllm``, which is
the OpenAI API at ``llm.api_base``) and the harness's MiniLM embedder folder (provider
``huggingface``, 384 dims). Ingestion follows Mem0's own LoCoMo evaluation: one Mem0 user per
speaker of a conversation; each batch of ``batch_turns`` turns is added to every speaker's
namespace, the speaker's own turns as role ``user`` and the others' as ``assistant``,
content ``"<speaker>: <text>"``; search queries each speaker namespace and merges by score.
A speaker named in ``assistant_speakers`` (HaluMem's ``assistant``) is an AI assistant, not a person: its
turns are context in the people's namespaces but it gets no namespace of its own, as HaluMem's toolkit adds
each session under the user's id alone (``eval/eval_memos.py``: one ``user_id`` per user, both roles).

Each namespace (conversation, HaluMem user) has its own Mem0 ``Memory`` (FAISS folder and history DB under
``mem0/<namespace>/``), so ``run.workers`` conversations are written at once and one conversation's results do
not depend on the others (Mem0's FAISS search takes the top ``2k`` of the whole index, then filters by user: a
shared index would let other conversations crowd a user's hits out).

What it reports (docs/baselines.md): mem0ai 2.x's open-source ``add`` is additive (its
extraction prompt only emits ADD), so in practice it raises no conflict signal. The mapping
below still handles UPDATE and DELETE, which older releases and the hosted platform return.
How the library is wired onto the harness (its config, the session date in its prompt): ``baselines.mem0_library``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from core.llm import retry_policy
from core.atomic import write_json_atomic
from core.api import AddReport, ConflictEvent, Retrieved, StoredItem, Turn
from core.paths import file_safe_name
from core.llm.library_tap import LibraryLLMTap

from baselines.mem0_library import SESSION_DATE, install_session_date_patch, local_embedder_dir, mem0_config, parses_as_mem0_json

log = logging.getLogger(__name__)

def mem0_results_to_report(
    results: list[dict[str, Any]],
    new_text: str,
    source_turn_ids: list[str],
    old_sources: Callable[[str], list[str]] = lambda memory_id: [],
) -> AddReport:
    """Map Mem0's add() events onto an AddReport.

    ADD -> stored. UPDATE -> stored (the new text) and an ``update`` conflict event: the held
    memory was rewritten by the new input. DELETE -> an ``update`` conflict event: Mem0 removes
    a held memory because the new input contradicts it, i.e. the new information wins (not a
    ``reject``, which would mean the *new* item is refused). NONE -> nothing changed.
    Unknown events are counted as failures.
    """
    report = AddReport()
    for item in results:
        event = str(item.get("event", "")).upper()
        memory_id = str(item.get("id", ""))
        text = str(item.get("memory", "") or "")
        if event == "ADD":
            report.stored.append(StoredItem(memory_id, text, list(source_turn_ids)))
        elif event == "UPDATE":
            report.stored.append(StoredItem(memory_id, text, list(source_turn_ids)))
            report.updated.append(
                ConflictEvent(
                    new_text=text,
                    old_text=str(item.get("previous_memory", "") or ""),
                    verdict="update",
                    reason="mem0 UPDATE: held memory rewritten by the new input",
                    new_source_turn_ids=list(source_turn_ids),
                    old_source_turn_ids=old_sources(memory_id),
                    old_memory_id=memory_id,
                )
            )
        elif event == "DELETE":
            report.updated.append(
                ConflictEvent(
                    new_text=new_text,
                    old_text=text,
                    verdict="update",
                    reason="mem0 DELETE: held memory removed as contradicted by the new input",
                    new_source_turn_ids=list(source_turn_ids),
                    old_source_turn_ids=old_sources(memory_id),
                    old_memory_id=memory_id,
                )
            )
        elif event == "NONE":
            continue
        else:
            log.warning("mem0 returned an unknown event %r; counted as a failure", event)
            report.failures += 1
    return report


def speaker_messages(turns: list[Turn], own_speaker: str) -> list[dict[str, str]]:
    """Mem0's LoCoMo convention: the namespace owner's turns are ``user``, everyone else ``assistant``."""
    return [
        {"role": "user" if turn.speaker == own_speaker else "assistant", "content": f"{turn.speaker}: {turn.text}"}
        for turn in turns
    ]


def mem0_user_id(namespace: str, speaker: str, generation: int) -> str:
    """Mem0 ids may not contain whitespace; the generation makes a reset start a fresh session scope."""
    raw = f"{namespace}--{speaker}--g{generation}"
    return re.sub(r"\s+", "_", raw.strip())


@dataclass(frozen=True)
class Mem0Snapshot:
    """A copy of Mem0's whole on-disk state (FAISS collections, history DB) and the adapter's bookkeeping."""

    path: Path
    registry: dict[str, dict[str, Any]]
    sources: dict[str, list[str]]


class Mem0Memory:
    """Mem0's open-source ``Memory`` on the harness LLM and embedder; one Mem0 user per speaker, one store per namespace."""

    parallel_namespaces = True  # a Memory (FAISS + history DB) per namespace; shared bookkeeping under a lock

    def __init__(
        self,
        llm: Any,
        embedder: Any,
        workdir: str,
        batch_turns: int = 2,
        search_threshold: float = 0.0,
        llm_provider: str = "vllm",
        max_tokens: int = 2000,
        temperature: float | None = 0.0,
        session_date_as_observation_date: bool = True,
        name: str = "mem0",
        request_timeout_s: float = 1800.0,
        *,
        assistant_speakers: Sequence[str],
        # no defaults: conf/system/mem0.yaml decides (tests/unit/repo/test_code_defaults.py); None = Mem0's own prompt / no retry
        custom_instructions: str | None,
        retry: Any,
    ) -> None:
        if batch_turns < 1:
            raise ValueError(f"system.batch_turns must be >= 1, got {batch_turns}")
        if not 0.0 <= search_threshold <= 1.0:
            raise ValueError(f"system.search_threshold must be in [0, 1], got {search_threshold}")
        self.llm = llm
        self.embedder = embedder
        self.workdir = Path(workdir)
        self.store_dir = self.workdir / "mem0"
        self.batch_turns = batch_turns
        self.assistant_speakers = frozenset(assistant_speakers)
        self.search_threshold = search_threshold
        self.llm_provider = llm_provider
        self.max_tokens = max_tokens
        self.session_date_as_observation_date = session_date_as_observation_date
        self.custom_instructions = custom_instructions
        self.name = name
        # per-request timeout for Mem0's own OpenAI client (its default, 600 s, then a retry from scratch,
        # is shorter than Mem0's ~8.4k-token first prompt takes on a busy 2-core CPU server)
        # output guard: Mem0 asks for json_object (no schema, so no list cap); a reply cut off at max_tokens or not
        # JSON is asked again as `retry` says (conf/system/mem0.yaml)
        self.retry = retry_policy(retry)
        self.tap = LibraryLLMTap("mem0", llm, purpose="mem0.extract", temperature=temperature, timeout_s=request_timeout_s,
                                 retry=self.retry)
        self.failed_adds = 0  # Mem0 add() calls (one batch, one speaker) whose output was dropped or unmapped
        self._memories: dict[str, Any] = {}
        self._lock = threading.RLock()  # registry, sources, counters and Memory construction
        self._registry_path = self.store_dir / "namespaces.json"
        self._registry: dict[str, dict[str, Any]] = (
            json.loads(self._registry_path.read_text()) if self._registry_path.exists() else {}
        )
        self._sources: dict[str, list[str]] = {}
        self._n_snapshots = 0

    # -- library ----------------------------------------------------------------------
    def namespace_dir(self, namespace: str) -> Path:
        """The namespace's own Mem0 store (FAISS collections, history DB)."""
        return self.store_dir / file_safe_name(namespace)

    def memory_for(self, namespace: str) -> Any:
        """The namespace's Mem0, built on first use (importing mem0 reads MEM0_DIR/MEM0_TELEMETRY, so set them first)."""
        memory = self._memories.get(namespace)
        if memory is not None:
            return memory
        with self._lock:
            if namespace not in self._memories:
                self._memories[namespace] = self._new_memory(self.namespace_dir(namespace))
            return self._memories[namespace]

    def _new_memory(self, store_dir: Path) -> Any:
        store_dir.mkdir(parents=True, exist_ok=True)
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ.setdefault("MEM0_DIR", str(self.store_dir))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from mem0 import Memory

        if self.session_date_as_observation_date:
            install_session_date_patch()
        config = mem0_config(
            api_base=self.llm.api_base,
            model_id=self.llm.model_id,
            api_key=self.llm.api_key,
            embedder_dir=local_embedder_dir(self.embedder),
            store_dir=store_dir,
            max_tokens=self.max_tokens,
            llm_provider=self.llm_provider,
            custom_instructions=self.custom_instructions,
        )
        memory = Memory.from_config(config)
        self.tap.install(memory.llm.client)
        return memory

    def run_metadata(self) -> dict[str, Any]:
        """What a run should record about how Mem0 ran here (search mode, versions)."""
        from importlib.metadata import version

        try:
            import spacy  # noqa: F401

            spacy_state = "installed (en_core_web_sm needs a download that is unreachable here)"
        except ImportError:
            spacy_state = "not installed"
        return {
            "library": "mem0ai",
            "library_version": version("mem0ai"),
            "search_mode": "semantic",
            "search_mode_reason": "FAISS store has no keyword_search (no BM25); spaCy " + spacy_state
            + " so entity boosts and lemmatisation are off",
            "add_pipeline": "additive (mem0ai 2.x OSS: ADD events only)",
            "search_threshold": self.search_threshold,
            "batch_turns": self.batch_turns,
            "store": "one Mem0 Memory (FAISS + history DB) per namespace",
            "assistant_speakers": sorted(self.assistant_speakers),
            "session_date_as_observation_date": self.session_date_as_observation_date,
            "custom_instructions": bool(self.custom_instructions),
            "output_guard": {"max_tokens": self.max_tokens, "max_items": None, "retry_attempts": self.retry.attempts,
                             "retry_temperature": self.retry.temperature, "retry_seed": self.retry.seed},
        }

    def metrics(self) -> dict[str, Any]:
        """What the output guard did (the tap's counts) and how many Mem0 adds failed (a failed add loses one
        batch of turns for one speaker; ``AddReport.failures`` counts the batch's turns once)."""
        return {"output_guard": self.tap.guard_counts(), "failed_adds": self.failed_adds}

    # -- namespaces -------------------------------------------------------------------
    def _entry(self, namespace: str) -> dict[str, Any]:
        with self._lock:
            return self._registry.setdefault(namespace, {"generation": 0, "speakers": []})

    def _save_registry(self) -> None:
        with self._lock:
            self.store_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self._registry_path, self._registry, indent=1)

    def _user_ids(self, namespace: str) -> list[tuple[str, str]]:
        """Mem0 user ids of the namespace's speakers; ``scope`` is the namespace the memories were written under
        (another one's after ``restore`` of its snapshot: the conflict suite's per-worker copies)."""
        with self._lock:
            entry = self._entry(namespace)
            scope = entry.get("scope", namespace)
            return [(s, mem0_user_id(scope, s, entry["generation"])) for s in entry["speakers"]]

    # -- MemorySystem -----------------------------------------------------------------
    def reset(self, namespace: str) -> None:
        for _, user_id in self._user_ids(namespace):
            self.memory_for(namespace).delete_all(user_id=user_id)
        with self._lock:
            entry = self._entry(namespace)
            entry["generation"] += 1  # fresh session scope: Mem0's "last k messages" start empty
            entry["speakers"] = []
            entry.pop("scope", None)
            self._save_registry()

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        with self._lock:
            entry = self._entry(namespace)
            for turn in turns:
                if turn.speaker not in entry["speakers"] and turn.speaker not in self.assistant_speakers:
                    entry["speakers"].append(turn.speaker)
            self._save_registry()
        report = AddReport(n_turns=len(turns))
        with self.tap.scoped() as meter:  # this add's calls only, whatever other namespaces do meanwhile
            self._add_batches(namespace, turns, session_time, report)
        report.usage = meter.snapshot()
        return report

    def _add_batches(self, namespace: str, turns: list[Turn], session_time: str | None, report: AddReport) -> None:
        for start in range(0, len(turns), self.batch_turns):
            batch = turns[start : start + self.batch_turns]
            when = batch[0].session_time or session_time
            turn_ids = [turn.turn_id for turn in batch]
            new_text = "\n".join(f"{turn.speaker}: {turn.text}" for turn in batch)
            batch_failed = False
            for speaker, user_id in self._user_ids(namespace):
                part = self._add_batch(namespace, batch, speaker, user_id, when, turn_ids, new_text)
                batch_failed |= part.failures > 0
                with self._lock:
                    self.failed_adds += int(part.failures > 0)
                part.failures = 0
                report.merge(part)
            report.failures += len(batch) if batch_failed else 0  # AddReport.failures counts failed turns in every system

    def _add_batch(
        self, namespace: str, batch: list[Turn], speaker: str, user_id: str, when: str | None, turn_ids: list[str], new_text: str
    ) -> AddReport:
        metadata: dict[str, Any] = {"source_turn_ids": turn_ids, "speaker": speaker}
        if when:
            metadata["session_time"] = when
        token = SESSION_DATE.set(when)
        try:
            with self.tap.scoped() as meter:
                out = self.memory_for(namespace).add(speaker_messages(batch, speaker), user_id=user_id, metadata=metadata)
        finally:
            SESSION_DATE.reset(token)
        results = out.get("results", []) if isinstance(out, dict) else list(out or [])
        with self._lock:
            part = mem0_results_to_report(results, new_text, turn_ids, lambda mid: self._sources.get(mid, []))
            for item in part.stored:
                self._sources[item.memory_id] = list(turn_ids)
        if meter.snapshot().calls and not parses_as_mem0_json(self.tap.last_text):
            part.failures += 1  # Mem0 logs and drops unparsable extraction output
        return part

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        if k <= 0:
            return []
        found: list[Retrieved] = []
        for speaker, user_id in self._user_ids(namespace):
            out = self.memory_for(namespace).search(query, filters={"user_id": user_id}, top_k=k, threshold=self.search_threshold)
            for item in out.get("results", []):
                meta = item.get("metadata") or {}
                found.append(
                    Retrieved(
                        text=f"({speaker}'s memory) {item.get('memory', '')}",
                        score=float(item.get("score") or 0.0),
                        timestamp=meta.get("session_time"),
                        source_turn_ids=list(meta.get("source_turn_ids") or []),
                        memory_id=str(item.get("id")),
                    )
                )
        found.sort(key=lambda r: r.score, reverse=True)
        return found[:k]

    # -- Snapshottable ----------------------------------------------------------------
    def _release(self, namespace: str) -> None:
        """Close the namespace's Mem0 (its SQLite connection) so its files can be copied; the next use rebuilds it."""
        with self._lock:
            memory = self._memories.pop(namespace, None)
        close = getattr(memory, "close", None)
        if close is not None:
            close()

    def snapshot(self, namespace: str) -> Mem0Snapshot:
        """Copy the namespace's Mem0 store as it is now (the conflict suite ingests a context once, then branches
        per probe). Other namespaces are untouched: each has its own store. Re-ingesting instead would replay
        every add of the context per probe (from the LLM cache at best)."""
        self._release(namespace)
        with self._lock:
            self._n_snapshots += 1
            number = self._n_snapshots
            entry = json.loads(json.dumps(self._entry(namespace)))
            entry.setdefault("scope", namespace)
        target = self.workdir / "mem0_snapshots" / f"{file_safe_name(namespace)}-{number}"
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        source = self.namespace_dir(namespace)
        if source.exists():
            shutil.copytree(source, target)
        else:
            target.mkdir()
        with self._lock:
            sources = {k: list(v) for k, v in self._sources.items()}
        return Mem0Snapshot(target, {namespace: entry}, sources)

    def restore(self, namespace: str, state: Mem0Snapshot) -> None:
        """Put ``state``'s store into ``namespace`` (its own, or another's: the memories keep the user ids they were
        written under, recorded as the entry's ``scope``)."""
        if not state.path.is_dir():
            raise FileNotFoundError(f"Mem0 snapshot folder {state.path} is gone; re-ingest instead (reset + add)")
        self._release(namespace)
        target = self.namespace_dir(namespace)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(state.path, target)
        (entry,) = state.registry.values()
        with self._lock:
            self._registry[namespace] = json.loads(json.dumps(entry))
            self._sources.update({k: list(v) for k, v in state.sources.items()})
            self._save_registry()

    # -- Inspectable ------------------------------------------------------------------
    def stored_items(self, namespace: str) -> list[StoredItem]:
        items: list[StoredItem] = []
        for speaker, user_id in self._user_ids(namespace):
            out = self.memory_for(namespace).get_all(filters={"user_id": user_id}, top_k=100_000)
            for item in out.get("results", []):
                meta = item.get("metadata") or {}
                items.append(
                    StoredItem(
                        str(item.get("id")),
                        f"({speaker}'s memory) {item.get('memory', '')}",
                        list(meta.get("source_turn_ids") or []),
                    )
                )
        return items
