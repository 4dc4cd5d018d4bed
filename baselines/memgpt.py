"""MemGPT as a real Letta 0.11.7 server (SQLite) behind the MemorySystem protocol, over REST.

The harness starts everything itself: the tool-call layer (core.llm.tool_calls, in-process, in
front of the harness LLM and the local MiniLM embedder) and ``letta server`` from ``.venv-letta``
(scripts/setup_letta.sh) with ``HOME`` in the run folder, so its SQLite database lives with the run and a
killed run resumes against it (``baselines.letta_server``). One Letta agent per namespace; what an add changed
is read from the agent's tool calls and archival memory (``baselines.letta_events``).

Ingest modes: ``messages`` (each turn is a user message to the agent, dated with its session; the
agent itself decides what goes to core and archival memory: MemGPT's behaviour) and ``archival``
(each turn inserted into archival memory directly, no LLM). Answer modes: ``shared`` (archival
search, plus the core-memory blocks, answered by the shared answerer) and ``agent`` (the question
is sent to the agent; its reply is what the answerer sees).

Letta's LLM calls bypass the harness client; the tool-call layer still sends them through it
(meter and cache, purpose ``memgpt.step``), and each add is metered from the usage Letta reports.

Concurrency (``run.workers``, see ``parallel_namespaces``): one agent per namespace. Each agent's LLM endpoint is
``/v1/agents/<tag>`` on the tool-call layer, so a request in flight is known to be that agent's: its clock (the
agent's "now") and its reply counts are the agent's own. Each thread talks to Letta on its own HTTP client.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from core.api import AddReport, LLMUsage, Retrieved, StoredItem, Turn
from core.atomic import write_json_atomic
from core.llm import retry_policy, usage_since
from core.llm.tool_calls import ROUTE_TAG, ToolCallServer
from core.paths import file_safe_name
from core.turn_costs import TurnCosts

from baselines.letta_canonical import LettaClock, LettaRequests
from baselines.letta_events import add_events, assistant_text, tool_calls_in
from baselines.letta_server import REPO, LettaError, LettaServer, ensure_letta

log = logging.getLogger(__name__)

STEP_PURPOSE = "memgpt.step"


def message_for(turn: Turn, template: str) -> str:
    """The user message a turn becomes: its session date, speaker and text."""
    when = ""
    if turn.session_time:
        try:
            when = datetime.fromisoformat(turn.session_time).strftime("%d %B %Y, %H:%M")
        except ValueError:
            when = turn.session_time
    return template.format(date=when or "unknown date", speaker=turn.speaker, text=turn.text)


def usage_from(letta_usage: dict[str, Any] | None) -> LLMUsage:
    """The harness's usage record of what Letta reports per request (steps = LLM calls)."""
    u = letta_usage or {}
    calls, prompt, completion = int(u.get("step_count", 0)), int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
    return LLMUsage(calls=calls, prompt_tokens=prompt, completion_tokens=completion,
                    by_purpose={STEP_PURPOSE: {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion}})


# -- the adapter -------------------------------------------------------------------------------
@dataclass
class _Ledger:
    """Per namespace, on disk: the agent, the turns it has been sent, where each passage came from."""

    agent_id: str
    done_turn_ids: list[str] = field(default_factory=list)
    passage_turns: dict[str, list[str]] = field(default_factory=dict)
    passage_times: dict[str, str | None] = field(default_factory=dict)
    core_turns: dict[str, list[str]] = field(default_factory=dict)
    failed_turn_ids: list[str] = field(default_factory=list)
    last_session_time: str | None = None  # the agent's "now" for a question (the latest turn it was sent)


def endpoint_tag(namespace: str) -> str:
    """The agent's endpoint tag on the tool-call layer (URL-safe, fixed per namespace)."""
    return hashlib.blake2b(namespace.encode(), digest_size=6).hexdigest()


class MemGPTMemory:
    """One Letta agent per namespace on a Letta server the adapter starts and stops."""

    # On: each agent has its own endpoint (clock, reply counts), each thread its own HTTP client. Two causes made
    # agents written at once differ from a serial run, both fixed: Letta lists an agent's persona and human blocks
    # in database order (random between agents) after an opening line that the canonical order did not expect
    # (baselines/letta_canonical.py), and a thread could see the Letta process spawned as running before it answered
    # (baselines/letta_server.py). Letta's own CPU per call still bounds the gain (results/bench/concurrency.md).
    parallel_namespaces = True
    input_parameters = ("letta_bin",)  # the server binary is hashed into a run's identity (core.api.DeclaresInputs)

    @staticmethod
    def row_label(settings: dict[str, str]) -> str | None:
        """What a configuration measures, where "memgpt" would mislead (core.api.LabelsRows): ``ingest_mode=archival``
        puts the turns into Letta's archival (vector) store, so its rows measure retrieval through Letta's store,
        answered by the harness's answerer or the agent, not MemGPT's own memory management."""
        if settings.get("ingest_mode") != "archival":
            return None
        answerer = {"shared": "harness answerer", "agent": "MemGPT agent answerer"}.get(settings.get("answer_mode", "shared"))
        return f"Letta archival store + {answerer}" if answerer else None

    def __init__(
        self,
        llm: Any,
        embedder: Any,
        workdir: str,
        name: str = "memgpt",
        letta_bin: str = ".venv-letta/bin/letta",
        ingest_mode: str = "messages",
        answer_mode: str = "shared",
        agent_type: str = "memgpt_agent",
        context_window: int = 8192,
        max_tokens: int = 512,
        put_inner_thoughts_in_kwargs: bool = False,
        max_steps: int = 6,
        *,
        retry: Any,  # no default: conf/system/memgpt.yaml decides (tests/unit/repo/test_code_defaults.py); None = no retry
        tool_string_max_chars: int | None = 600,
        archival_tools: tuple[str, ...] = ("archival_memory_insert", "archival_memory_search"),
        persona: str = "I am a memory assistant. I keep what I learn about the people in this chat.",
        human: str = "",
        message_template: str = "[{date}] {speaker}: {text}",
        question_template: str = "Answer from your memory, briefly: {question}",
        search_includes_core_memory: bool = True,
        start_timeout_s: float = 600.0,
        request_timeout_s: float = 3600.0,
        stop_grace_s: float = 3.0,
        undated_clock: str = "2000-01-01T00:00:00",
    ) -> None:
        if ingest_mode not in ("messages", "archival"):
            raise ValueError(f"system.ingest_mode={ingest_mode!r}: use messages or archival (conf/system/memgpt.yaml)")
        if answer_mode not in ("shared", "agent"):
            raise ValueError(f"system.answer_mode={answer_mode!r}: use shared or agent (conf/system/memgpt.yaml)")
        self.name = name
        self.llm = llm
        self.embedder = embedder
        self.workdir = Path(workdir)
        self.letta_bin = letta_bin  # as configured; a relative path is taken from the repository root
        self._letta_path = str(REPO / letta_bin) if not os.path.isabs(letta_bin) else letta_bin
        self.ingest_mode = ingest_mode
        self.answer_mode = answer_mode
        self.agent_type = agent_type
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.put_inner_thoughts_in_kwargs = put_inner_thoughts_in_kwargs
        self.max_steps = max_steps
        self.archival_tools = tuple(archival_tools)
        self.persona = persona
        self.human = human
        self.message_template = message_template
        self.question_template = question_template
        self.search_includes_core_memory = search_includes_core_memory
        self.start_timeout_s = start_timeout_s
        self.request_timeout_s = request_timeout_s
        self.stop_grace_s = stop_grace_s  # Letta's SIGTERM-to-SIGKILL wait when the run stops
        self.undated_clock = undated_clock
        self.clock = LettaClock(undated=undated_clock)  # "now" for requests on the untagged endpoint (agents made before tags)
        self.requests = LettaRequests(self.clock)
        self._clocks: dict[str, LettaClock] = {}  # per endpoint tag: the agent's "now", the session time of the turn it processes
        self._prompt_messages: dict[str | None, int] = {}  # per tag: messages in Letta's latest request (a drop: Letta evicted)
        self._lock = threading.RLock()  # server start, ledgers, clocks, counters
        self.retry = retry_policy(retry)  # tries per tool call (the harness's one retry mechanism, core.llm.RetryPolicy)
        self.tools = ToolCallServer(llm, embedder=embedder, purpose=STEP_PURPOSE, retry=self.retry,
                                   max_tokens_cap=max_tokens, string_max_chars=tool_string_max_chars,
                                   request_log=str(self.workdir / "tool_requests.jsonl"), canonical_request=self._canonical)
        self.server = LettaServer(self._letta_path, self.workdir, start_timeout_s, request_timeout_s, stop_grace_s)
        self.ledger_dir = self.workdir / "memgpt_ledger"
        self.turn_costs = TurnCosts(self.workdir)  # per turn, as it finishes: a stopped run still has its cost
        self._ledgers: dict[str, _Ledger] = {}
        self._pending_reset: set[str] = set()
        self.resumed_turns_skipped = 0
        self.snapshot_method = "export/import"
        self.n_snapshots = 0
        self._turn_records: list[dict[str, Any]] = []  # per turn sent in this invocation: seconds, tokens, prefix reuse

    def _canonical(self, request: dict[str, Any]) -> dict[str, Any]:
        """The tool-call layer's hook: Letta's clock at the agent's "now", its lists in a fixed order (baselines.letta_canonical)."""
        tag = ROUTE_TAG.get()
        self._prompt_messages[tag] = len(request.get("messages", []))
        clock = self._clocks.get(tag) if tag is not None else None
        return (LettaRequests(clock) if clock is not None else self.requests).canonical(request)

    def _clock(self, namespace: str) -> LettaClock:
        with self._lock:
            return self._clocks.setdefault(endpoint_tag(namespace), LettaClock(undated=self.undated_clock))

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if not self.server.running:
            with self._lock:
                if not self.server.running:
                    self.start()
        return self.server.base_url

    def start(self) -> None:
        """Build Letta's environment if missing, start the tool-call layer, then the Letta server (baselines.letta_server)."""
        ensure_letta(self._letta_path)
        self.tools.start()
        self.server.start()

    def close(self) -> None:
        """Stop in the order of calls, waiting for no generation: the tool-call layer refuses new steps and
        answers the ones in flight with 503 (Letta stops stepping), the adapter drops its request to Letta,
        Letta gets SIGTERM (SIGKILL after ``stop_grace_s``), then the tool-call server stops. The LLM client
        is the runner's to close, after this."""
        self.tools.begin_close()
        self.server.close_clients()
        self.server.stop()
        self.tools.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.base_url  # noqa: B018 - starts the server on first use
        return self.server.request(method, path, **kwargs)

    # -- agents and the on-disk ledger --------------------------------------------------------
    def _ledger_path(self, namespace: str) -> Path:
        return self.ledger_dir / f"{file_safe_name(namespace)}.json"

    def _save(self, namespace: str) -> None:
        self.ledger_dir.mkdir(parents=True, exist_ok=True)
        path = self._ledger_path(namespace)
        write_json_atomic(path, self._ledgers[namespace].__dict__)

    def _load(self, namespace: str) -> _Ledger | None:
        with self._lock:
            return self._load_unlocked(namespace)

    def _load_unlocked(self, namespace: str) -> _Ledger | None:
        if namespace not in self._ledgers and self._ledger_path(namespace).exists():
            self._ledgers[namespace] = _Ledger(**json.loads(self._ledger_path(namespace).read_text()))
        return self._ledgers.get(namespace)

    def _create_agent(self, namespace: str) -> str:
        llm_config = {
            "model": self.llm.model_id, "model_endpoint_type": "openai",
            "model_endpoint": f"{self.tools.api_base}/agents/{endpoint_tag(namespace)}",  # its own endpoint: see the module doc
            "context_window": self.context_window, "max_tokens": self.max_tokens, "temperature": 0.0,
            "put_inner_thoughts_in_kwargs": self.put_inner_thoughts_in_kwargs,
        }
        embedding_config = {
            "embedding_endpoint_type": "openai", "embedding_endpoint": self.tools.api_base,
            "embedding_model": self.embedder.model_id, "embedding_dim": int(self.embedder.dim), "embedding_chunk_size": 300,
        }
        agent = self._request("POST", "/v1/agents/", json={
            "name": f"mosaic-{file_safe_name(namespace)}-{int(time.time() * 1000)}",
            "agent_type": self.agent_type, "llm_config": llm_config, "embedding_config": embedding_config,
            "memory_blocks": [{"label": "persona", "value": self.persona}, {"label": "human", "value": self.human}],
            "include_base_tools": True,
        })
        held = {t["name"] for t in self._request("GET", f"/v1/agents/{agent['id']}/tools")}
        for tool_name in self.archival_tools:  # names given at create time are ignored: attach by id
            if tool_name in held:
                continue
            found = self._request("GET", "/v1/tools/", params={"name": tool_name})
            if not found:
                raise LettaError(f"Letta has no tool named {tool_name!r} (system.archival_tools)")
            self._request("PATCH", f"/v1/agents/{agent['id']}/tools/attach/{found[0]['id']}")
        return str(agent["id"])

    def _delete_agent(self, agent_id: str) -> None:
        try:
            self._request("DELETE", f"/v1/agents/{agent_id}")
        except LettaError as err:
            log.warning("could not delete agent %s: %s", agent_id, err)

    def reset(self, namespace: str) -> None:
        """Forget ``namespace`` -- unless the next add turns out to resume it (see ``_agent``)."""
        with self._lock:
            self._pending_reset.add(namespace)

    def _agent(self, namespace: str, first_turn: Turn | None) -> _Ledger:
        """The namespace's agent. After ``reset``, an add whose first turn is the first turn this
        namespace was sent is a resumed run (the runner resets before re-adding a conversation):
        the agent is kept and finished turns are skipped. Otherwise the agent is replaced."""
        with self._lock:
            ledger = self._load(namespace)
            pending = namespace in self._pending_reset
            self._pending_reset.discard(namespace)
        if pending:
            resuming = (ledger is not None and first_turn is not None and ledger.done_turn_ids
                        and ledger.done_turn_ids[0] == first_turn.turn_id)
            if ledger is not None and not resuming:
                self._delete_agent(ledger.agent_id)
                ledger = None
        if ledger is None:
            ledger = _Ledger(agent_id=self._create_agent(namespace))
            with self._lock:
                self._ledgers[namespace] = ledger
            self._save(namespace)
        return ledger

    # -- reads --------------------------------------------------------------------------------
    def _passages(self, agent_id: str) -> dict[str, str]:
        listed = self._request("GET", f"/v1/agents/{agent_id}/archival-memory", params={"limit": 100000})
        return {p["id"]: p["text"] for p in listed}

    def _blocks(self, agent_id: str) -> dict[str, str]:
        return {b["label"]: b["value"] for b in self._request("GET", f"/v1/agents/{agent_id}/core-memory/blocks")}

    def _send(self, agent_id: str, text: str) -> dict[str, Any]:
        return self._request("POST", f"/v1/agents/{agent_id}/messages", json={
            "messages": [{"role": "user", "content": text}], "max_steps": self.max_steps})

    # -- MemorySystem -------------------------------------------------------------------------
    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        report = AddReport(n_turns=len(turns))
        if not turns:
            return report
        ledger = self._agent(namespace, turns[0])
        done = set(ledger.done_turn_ids)
        for turn in turns:
            if turn.turn_id in done:
                with self._lock:
                    self.resumed_turns_skipped += 1
                continue
            if session_time and not turn.session_time:
                turn = Turn(turn.turn_id, turn.speaker, turn.text, session_time)
            started, usage_before, failures_before = time.perf_counter(), copy.deepcopy(report.usage), report.failures
            replies_before = self._reply_counts(namespace)
            if self.ingest_mode == "archival":
                self._add_archival(ledger, turn, report)
            else:
                self._add_message(namespace, ledger, turn, report)
            seconds = time.perf_counter() - started
            step = {k: v - replies_before[k] for k, v in self._reply_counts(namespace).items()}
            record = {"turn_index": len(ledger.done_turn_ids), "seconds": round(seconds, 3), **step,
                      "prompt_messages": self._prompt_messages.get(endpoint_tag(namespace), 0)}
            self._turn_records.append(record)
            self.turn_costs.record(namespace, turn.turn_id, seconds, usage_since(usage_before, report.usage),
                                   failures=report.failures - failures_before, mode=self.ingest_mode,
                                   **{k: v for k, v in record.items() if k != "seconds"})  # fmt: skip
            ledger.done_turn_ids.append(turn.turn_id)
            ledger.last_session_time = turn.session_time or ledger.last_session_time
            self._save(namespace)
        return report

    def _add_archival(self, ledger: _Ledger, turn: Turn, report: AddReport) -> None:
        body: dict[str, Any] = {"text": f"{turn.speaker}: {turn.text}"}
        if turn.session_time:
            body["created_at"] = turn.session_time
        for passage in self._request("POST", f"/v1/agents/{ledger.agent_id}/archival-memory", json=body):
            ledger.passage_turns[passage["id"]] = [turn.turn_id]
            ledger.passage_times[passage["id"]] = turn.session_time
            report.stored.append(StoredItem(passage["id"], passage["text"], [turn.turn_id]))

    def _add_message(self, namespace: str, ledger: _Ledger, turn: Turn, report: AddReport) -> None:
        before = self._passages(ledger.agent_id)
        try:
            self._clock(namespace).set(turn.session_time)  # the agent's "now" while it processes this turn
            self.clock.set(turn.session_time)  # (an agent made before endpoint tags reads this one)
            response = self._send(ledger.agent_id, message_for(turn, self.message_template))
        except (LettaError, httpx.HTTPError) as err:
            log.warning("memgpt: turn %s failed: %s", turn.turn_id, err)
            report.failures += 1
            ledger.failed_turn_ids.append(turn.turn_id)
            response = {"messages": [], "usage": None}
        after = self._passages(ledger.agent_id)
        stored, events = add_events(turn, tool_calls_in(response.get("messages", [])), before, after, ledger.passage_turns)
        for item in stored:
            if item.memory_id.startswith("core:"):
                ledger.core_turns.setdefault(item.memory_id, []).append(turn.turn_id)
            else:
                ledger.passage_turns[item.memory_id] = [turn.turn_id]
                ledger.passage_times[item.memory_id] = turn.session_time
        for pid in set(before) - set(after):
            ledger.passage_turns.pop(pid, None)
        report.stored += stored
        report.updated += events
        report.usage.merge(usage_from(response.get("usage")))

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        ledger = self._agent(namespace, None)
        hits: list[Retrieved] = []
        if self.answer_mode == "agent":
            self._clock(namespace).set(ledger.last_session_time)
            self.clock.set(ledger.last_session_time)  # a question is asked after the latest turn the agent was sent
            response = self._send(ledger.agent_id, self.question_template.format(question=query))
            hits.append(Retrieved(text=f"The MemGPT agent answered: {assistant_text(response.get('messages', []))}", score=1.0))
        if self.search_includes_core_memory:
            for label, value in self._blocks(ledger.agent_id).items():
                if label != "persona" and value.strip():
                    hits.append(Retrieved(text=f"[core memory: {label}] {value}", score=1.0,
                                          source_turn_ids=list(dict.fromkeys(ledger.core_turns.get(f"core:{label}", []))),
                                          memory_id=f"core:{label}"))
        found = self._request("GET", f"/v1/agents/{ledger.agent_id}/archival-memory/search", params={"query": query, "top_k": k})
        by_text = {text: pid for pid, text in self._passages(ledger.agent_id).items()} if found["results"] else {}
        for rank, result in enumerate(found["results"][:k]):
            pid = by_text.get(result["content"])
            hits.append(Retrieved(  # Letta returns ranked passages without scores: the score is the rank's
                text=result["content"], score=1.0 - rank / max(k, 1),
                timestamp=ledger.passage_times.get(pid) if pid else None,
                source_turn_ids=list(ledger.passage_turns.get(pid, [])) if pid else [], memory_id=pid))
        return hits

    def stored_items(self, namespace: str) -> list[StoredItem]:
        ledger = self._agent(namespace, None)
        items = [StoredItem(pid, text, list(ledger.passage_turns.get(pid, []))) for pid, text in self._passages(ledger.agent_id).items()]
        items += [StoredItem(f"core:{label}", value, list(ledger.core_turns.get(f"core:{label}", [])))
                  for label, value in self._blocks(ledger.agent_id).items() if label != "persona"]
        return items

    # -- Snapshottable: Letta's agent file export/import --------------------------------------
    def snapshot(self, namespace: str) -> dict[str, Any]:
        ledger = self._agent(namespace, None)
        self.n_snapshots += 1
        return {"agent_file": self._request("GET", f"/v1/agents/{ledger.agent_id}/export"),
                "ledger": json.loads(json.dumps(ledger.__dict__)), "passage_texts": self._passages(ledger.agent_id)}

    def restore(self, namespace: str, state: dict[str, Any]) -> None:
        """Replace the namespace's agent by an import of the snapshot's agent file; imported passages
        get new ids, so the ledger's passage provenance is re-keyed by passage text."""
        ledger = self._agent(namespace, None)
        self._delete_agent(ledger.agent_id)
        imported = self._request("POST", "/v1/agents/import", data={"append_copy_suffix": "false"}, files={
            "file": ("agent.af", json.dumps(state["agent_file"]).encode(), "application/json")})
        self._point_at_own_endpoint(imported["agent_ids"][0], namespace)
        restored = _Ledger(**{**state["ledger"], "agent_id": imported["agent_ids"][0],
                              "passage_turns": {}, "passage_times": {}})
        new_by_text = {text: pid for pid, text in self._passages(restored.agent_id).items()}
        for old_id, text in state["passage_texts"].items():
            if text in new_by_text:
                restored.passage_turns[new_by_text[text]] = state["ledger"]["passage_turns"].get(old_id, [])
                restored.passage_times[new_by_text[text]] = state["ledger"]["passage_times"].get(old_id)
        with self._lock:
            self._ledgers[namespace] = restored
        self._save(namespace)

    def _point_at_own_endpoint(self, agent_id: str, namespace: str) -> None:
        """An imported agent keeps the endpoint of the agent it was exported from (another namespace's, in the
        conflict suite's per-worker copies): give it this namespace's, so its requests read this namespace's clock."""
        agent = self._request("GET", f"/v1/agents/{agent_id}")
        llm_config = {**agent["llm_config"], "model_endpoint": f"{self.tools.api_base}/agents/{endpoint_tag(namespace)}"}
        self._request("PATCH", f"/v1/agents/{agent_id}", json={"llm_config": llm_config})

    def _reply_counts(self, namespace: str) -> dict[str, int]:
        stats = self.tools.tag_stats(endpoint_tag(namespace))
        return {"model_replies": stats.model_replies, "cache_replies": stats.cache_replies,
                "prompt_tokens": stats.prompt_tokens, "server_cached_prompt_tokens": stats.server_cached_prompt_tokens}

    def metrics(self) -> dict[str, Any]:
        return {
            "ingest_mode": self.ingest_mode,
            "answer_mode": self.answer_mode,
            "agent_type": self.agent_type,
            "letta_version": "0.11.7",
            "max_tokens": self.max_tokens,
            "output_guard": {"max_tokens": self.max_tokens, "string_max_chars": self.tools.string_max_chars,
                             "retry_attempts": self.retry.attempts, "retry_temperature": self.retry.temperature,
                             "retry_seed": self.retry.seed},
            "tool_calls": self.tools.stats.__dict__,
            "resumed_turns_skipped": self.resumed_turns_skipped,
            "failed_turns": sum(len(l.failed_turn_ids) for l in self._ledgers.values()),
            "sqlite_schema_fix_applied": self.server.schema_fixed,
            "snapshot_method": self.snapshot_method,
            "server_start_s": self.server.start_s,
            "context_window": self.context_window,
            "clock": "session time of the turn being processed (baselines/letta_canonical.py)",
            "prefix_reuse": prefix_reuse(self._turn_records),
            "turns_this_invocation": self._turn_records,
        }


def prefix_reuse(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the model's replies (not the response cache's): prompt tokens, how many the server's prefix cache
    covered, their share, and the seconds per turn against its index (first and second half of the turns, so
    growth with the index shows without a figure)."""
    prompt = sum(int(t.get("prompt_tokens", 0)) for t in turns)
    cached = sum(int(t.get("server_cached_prompt_tokens", 0)) for t in turns)
    half = len(turns) // 2
    mean = lambda rows: round(sum(float(t["seconds"]) for t in rows) / len(rows), 2) if rows else None  # noqa: E731
    return {"prompt_tokens": prompt, "server_cached_prompt_tokens": cached, "share": round(cached / prompt, 4) if prompt else None,
            "turns": len(turns), "mean_seconds_first_half": mean(turns[:half]), "mean_seconds_second_half": mean(turns[half:])}

