"""The seams of the harness: every Protocol and report type that crosses a layer.

Benchmarks talk to memory systems only through ``MemorySystem`` (and the optional capability
Protocols); every component talks to an LLM only through ``LLMClient``; outside libraries that
build their own OpenAI client reach the harness's endpoint, meter and cache through
``ServedLLM``. Gold answers never cross these seams.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

ConflictVerdict = Literal["update", "reject", "flag"]
ConflictType = Literal["numeric", "semantic", "logical", "unknown"]


@dataclass(frozen=True)
class OracleFact:
    """One gold extraction a benchmark ships (HaluMem's memory point, LoCoMo's session observation).

    The oracle-extractor study (docs/halumem.md) hands these to a system in place of its own extraction
    LLM call; a benchmark attaches them to ``Turn.oracle_facts`` only when the run asks for them
    (``benchmark.oracle_facts: true``). They are what was said, never a question's gold answer.
    """

    fact_id: str  # stable gold id within the benchmark item (HaluMem "<session>:p<index>", LoCoMo "session_<N>:obs<k>")
    text: str
    subject: str = ""  # whose fact, when the benchmark says (HaluMem: the user; LoCoMo: the observation's speaker)
    memory_type: str | None = None  # the benchmark's own label, verbatim (HaluMem "Persona Memory"); None when it has none
    source_turn_ids: tuple[str, ...] = ()  # the turns the benchmark cites as its evidence (LoCoMo D<s>:<t>); () when none
    # the gold-judge study (``benchmark.oracle_conflicts``): fact ids of earlier gold facts this one contradicts or makes
    # out of date, by the benchmark's own labels; () in every other run. A system with a gold judge reads these in place
    # of its conflict judgement; nothing else does
    replaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class Turn:
    """One utterance as it enters memory. ``turn_id`` is LoCoMo's ``dia_id`` (or the suite's id).

    ``oracle_facts``: the benchmark's gold extractions that arrive with this turn, attached only in an
    oracle run (``benchmark.oracle_facts``); a system that does not read them ignores them.
    """

    turn_id: str
    speaker: str
    text: str
    session_time: str | None = None  # ISO-8601 date-time of the session, when known
    oracle_facts: tuple[OracleFact, ...] = ()


@dataclass
class Retrieved:
    """One memory item returned by ``search``; ``source_turn_ids`` drives evidence recall."""

    text: str
    score: float
    timestamp: str | None = None
    source_turn_ids: list[str] = field(default_factory=list)
    memory_id: str | None = None


@dataclass
class ConflictEvent:
    """A conflict signal raised while adding: which new item clashed with which held item."""

    new_text: str
    old_text: str
    verdict: ConflictVerdict
    conflict_type: ConflictType = "unknown"
    reason: str = ""
    new_source_turn_ids: list[str] = field(default_factory=list)
    old_source_turn_ids: list[str] = field(default_factory=list)
    old_memory_id: str | None = None
    # oracle runs: the OracleFact ids the two items were made from (None for a model-extracted item)
    new_fact_id: str | None = None
    old_fact_id: str | None = None


@dataclass
class StoredItem:
    """A memory item as it now exists after an add (for extraction metrics)."""

    memory_id: str
    text: str
    source_turn_ids: list[str] = field(default_factory=list)
    fact_id: str | None = None  # oracle runs: the OracleFact it was made from (None when model-extracted)


@dataclass
class LLMUsage:
    """LLM cost of one operation, split by purpose (``extraction``, ``conflict``, ...)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_calls: int = 0
    by_purpose: dict[str, dict[str, int]] = field(default_factory=dict)

    def merge(self, other: "LLMUsage") -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_calls += other.cached_calls
        for purpose, counts in other.by_purpose.items():
            mine = self.by_purpose.setdefault(purpose, {})
            for key, value in counts.items():
                mine[key] = mine.get(key, 0) + value


@dataclass
class AddReport:
    """What one ``add`` did: stored / updated / rejected / flagged items, and what it cost."""

    stored: list[StoredItem] = field(default_factory=list)
    updated: list[ConflictEvent] = field(default_factory=list)
    rejected: list[ConflictEvent] = field(default_factory=list)
    flagged: list[ConflictEvent] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)  # held back by a confidence gate
    usage: LLMUsage = field(default_factory=LLMUsage)
    n_turns: int = 0
    failures: int = 0  # failed turns: turns whose write lost output to an LLM fault (every system counts turns; docs/baselines.md)

    @property
    def conflict_events(self) -> list[ConflictEvent]:
        return [*self.updated, *self.rejected, *self.flagged]

    def merge(self, other: "AddReport") -> None:
        self.stored += other.stored
        self.updated += other.updated
        self.rejected += other.rejected
        self.flagged += other.flagged
        self.queued += other.queued
        self.usage.merge(other.usage)
        self.n_turns += other.n_turns
        self.failures += other.failures

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class MemorySystem(Protocol):
    """What a memory system must offer to be benchmarked."""

    name: str

    def reset(self, namespace: str) -> None:
        """Forget everything held under ``namespace``."""

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        """Ingest turns (one session or one probe) and report what changed."""

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        """Return up to ``k`` memory items for ``query``."""


@runtime_checkable
class Snapshottable(Protocol):
    """Optional: systems that can branch from one ingested state (conflict suite, HaluMem)."""

    def snapshot(self, namespace: str) -> Any: ...

    def restore(self, namespace: str, state: Any) -> None: ...


@runtime_checkable
class Seedable(Protocol):
    """Optional: systems that can take turns as already-vetted knowledge, without save-time checks.

    The injected-conflict suite seeds each context this way, so that memory holds exactly the
    context the probes are checked against instead of the context's facts judged against each other.
    """

    def seed(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport: ...


@runtime_checkable
class Inspectable(Protocol):
    """Optional: systems that can list what they hold (HaluMem extraction metrics)."""

    def stored_items(self, namespace: str) -> list[StoredItem]: ...


@runtime_checkable
class Clarifiable(Protocol):
    """Optional (Inspectable family): systems that hold uncertain memories back and can ask about them.

    ``clarification_targets`` returns the questions worth asking under a budget, best first, each
    with the coverage it adds; ``resolve_clarification`` feeds an answer back as evidence.
    """

    def clarification_queue(self, namespace: str) -> list[dict[str, Any]]: ...

    def clarification_targets(self, namespace: str, budget: int) -> list[dict[str, Any]]: ...

    def resolve_clarification(self, namespace: str, item: str | dict[str, Any], answer: str | bool | None = None) -> AddReport: ...


class HarnessError(Exception):
    """A fault the harness knows how to explain: its message names the file, URL or key and the fix.

    run.py prints it as one line (no traceback unless HYDRA_FULL_ERROR=1) and exits non-zero.
    """


class LLMError(HarnessError, RuntimeError):
    """The server could not be reached or kept failing after bounded retries."""


class LLMOutputError(ValueError):
    """The model's output broke the requested JSON schema even after retries."""


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    model: str
    logprobs: list[dict[str, Any]] | None = None
    cached_prompt_tokens: int = 0  # prompt tokens the server reused from its prefix cache (usage.prompt_tokens_details)

    def json(self) -> Any:
        """Parse the text as JSON, tolerating a Markdown code fence around it."""
        text = self.text.strip()
        if text.startswith("```"):
            text = text.strip("`")
            text = text[text.find("\n") + 1 :] if "\n" in text else text
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise LLMOutputError(f"model output is not valid JSON: {err}: {self.text[:300]!r}") from err


@runtime_checkable
class LLMClient(Protocol):
    """The chat interface every component uses (systems, answerer, judges)."""

    model_id: str

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        response_schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int = 0,
        purpose: str = "other",
        top_logprobs: int = 0,
    ) -> ChatResult: ...

    def chat_json(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        *,
        max_tokens: int = 256,
        purpose: str = "other",
        attempts: int = 2,
    ) -> Any: ...

    @property
    def usage(self) -> LLMUsage: ...


@runtime_checkable
class UsageRecorder(Protocol):
    """Anything that counts LLM calls by purpose (the harness's meter)."""

    def record(self, purpose: str, result: ChatResult) -> None: ...


@runtime_checkable
class ResponseStore(Protocol):
    """A request-keyed response cache (the harness's SQLite cache)."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any]) -> None: ...


@runtime_checkable
class ServedLLM(LLMClient, Protocol):
    """An LLMClient behind an OpenAI-compatible HTTP endpoint that outside libraries can call too.

    Adapters of libraries with their own OpenAI client (Mem0, A-Mem, graphiti, Letta) point that
    client at ``api_base`` with ``api_key`` and route its calls through ``meter`` and ``cache``.
    """

    timeout_s: float
    meter: UsageRecorder
    cache: ResponseStore | None

    @property
    def api_base(self) -> str: ...

    @property
    def api_key(self) -> str: ...


# ==== Per-benchmark reporting: what eval/'s shared modules ask a benchmark class instead of naming it ====
# A shared module (eval/compare.py, eval/decomposition.py, eval/retrieval_paired.py, scripts/compare_runs.py) finds a
# run's benchmark class from the run's own record (``metadata.benchmark_target``, or a class path conf/report.yaml
# lists) and asks it through these; what a benchmark does not declare, the shared module does not report. Static
# methods: the class answers for finished runs, with no data loaded and no instance built.


@dataclass(frozen=True)
class Comparison:
    """How ``scripts.compare_runs`` pairs two finished runs of one benchmark, item by item.

    ``quality(base_dir, other_dir, n_samples, seed, sessions)`` returns each field's paired difference (``eval.compare``'s
    ``paired_difference`` dicts, plus ``n_shared``); ``write_cost(run_dir, sessions)`` what the write path cost per unit.
    """

    fields: tuple[tuple[str, str], ...]  # (key in ``quality``'s result, column head), in the table's order
    cluster_unit: str  # what one cluster of items is (conversation, user, context): the cluster interval's name
    quality: Callable[[Path, Path, int, int, int | None], dict[str, Any]]
    write_cost: Callable[[Path, int | None], dict[str, Any]]
    cost_unit: str = "ingested turn"  # the unit ``write_cost`` divides by, as the table's note names it
    returned_tokens: bool = False  # ``quality`` carries ``returned_tokens`` (tokens each search returned)
    cuts_sessions: bool = False  # ``sessions`` may cut both runs to their first N sessions
    per_category_axis: str | None = None  # the plot shows ``correct`` overall and ``per_category`` on this axis; else ``fields``


@runtime_checkable
class PairedComparable(Protocol):
    """A benchmark whose finished runs can be paired: full runs, or retrieval-only runs (no answers, no judge)."""

    @staticmethod
    def comparison(retrieval_only: bool) -> Comparison: ...


@runtime_checkable
class RetrievalRecomputable(Protocol):
    """A benchmark that recomputes a retrieval-only run's metrics from its stored ranked rows with today's code.

    ``recompute_retrieval`` returns ``{"retrieval": ..., eval.retrieval_paired.SECTION: paired differences to
    base_dir}`` (no section for the base itself, or with no base), or None for a folder without retrieval rows."""

    @staticmethod
    def recompute_retrieval(run_dir: Path, base_dir: Path | None) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class DecompositionPart:
    """One benchmark's columns of the extractor/organisation decomposition (eval/decomposition.py).

    ``runs``: (group, row key) -> the run the row shows; ``cells(run or None, group)`` -> column -> cell text.
    With ``by_group`` each group (LoCoMo's slices) is a block of the table's rows; otherwise ``runs`` has group ""
    and the same run fills its row in every block."""

    label: str  # how the failures column names the benchmark
    runs: dict[tuple[str, Any], dict[str, Any]]
    cells: Callable[[dict[str, Any] | None, str], dict[str, str]]
    by_group: bool = False
    note: str = ""  # the caption's sentence on how this benchmark picked its runs


@runtime_checkable
class DecompositionColumns(Protocol):
    """A benchmark with columns in the decomposition table: from its runs, the one per row (``row_of(metrics)``
    is the run's row key, None for a run that is no row)."""

    @staticmethod
    def decomposition(runs: list[dict[str, Any]], row_of: Callable[[dict[str, Any]], Any]) -> DecompositionPart: ...


# ==== end of per-benchmark reporting ====


# -- capabilities the eval layer reads from a system (each optional; checked with isinstance, never by name) --
@runtime_checkable
class ReportsRunMetadata(Protocol):
    """Optional: a system that states how it was set up for this run (Mem0's "semantic search only (no spaCy
    model)"); the runner stores it as ``metadata.system_metadata`` in metrics.json."""

    def run_metadata(self) -> dict[str, Any]: ...


@runtime_checkable
class ReportsMetrics(Protocol):
    """Optional: a system that counts its own mechanisms (MOSAIC's LSH fallback rate, NCS drift); the counts
    go to metrics.json ``system_metrics``."""

    def metrics(self) -> dict[str, Any]: ...


@runtime_checkable
class ParallelNamespaces(Protocol):
    """Optional: ``parallel_namespaces`` true says different namespaces may be reset/added/searched from
    different threads at once (per-namespace state only). Absent or false: eval.workers serialises them."""

    parallel_namespaces: bool


@runtime_checkable
class ParallelSearch(Protocol):
    """Optional: ``parallel_search`` true says ``search`` is a pure read, so concurrent searches of one
    namespace are safe and their order cannot change a result. Absent or false: searches run one at a time,
    in order (MOSAIC's continuity term changes state on each search)."""

    parallel_search: bool


@runtime_checkable
class DeclaresConflictSignal(Protocol):
    """Optional: what a system offers as a conflict signal. ``False``: none by construction (append-only
    systems; Table 3 scores them 0 and HaluMem counts no update links); a string names the mechanism
    (Zep's temporal edge invalidation). Absent: the system reports conflicts in ``AddReport`` as it finds them."""

    conflict_signal: str | bool


@runtime_checkable
class Benchmark(Protocol):
    """A benchmark drives a memory system through its protocol and returns metrics.

    ``ctx`` is the runner's ``eval.context.RunContext`` (run folder, row files, LLMs, judge, workers); typed
    ``Any`` here because core sits below eval.
    """

    name: str

    def run(self, system: MemorySystem, ctx: Any) -> dict[str, Any]:
        """Run every stage (resuming from ``ctx`` row files) and return the metrics dict."""

    @staticmethod
    def make_table(metrics: list[dict[str, Any]], convention: str | None = None) -> Any:
        """Build this benchmark's paper-shaped table (a pandas DataFrame) from metrics.json dicts."""


@runtime_checkable
class InputChecked(Protocol):
    """A benchmark that can read and check its inputs (data files, slice) without a system or an LLM.

    The runner calls it before the run folder exists, so a missing file, a format error or a slice that
    selects nothing fails with its one-line error (a HarnessError naming the file/key and the fix).
    """

    def check_inputs(self) -> None: ...


# -- what the evaluation core reads from a benchmark's or system's class, by capability, never by name ------------
# eval/'s shared modules (config checks, tables, publishing, mechanism counts, make_tables) find these on the class a
# run's config or record names (its ``_target_``), so adding a benchmark or system touches no shared module.
@runtime_checkable
class ChecksOwnConfig(Protocol):
    """Optional, on a benchmark class: the problems of its own config block (keys only it has, e.g. a category list
    its data defines), each as ``benchmark.<key>=<value>: must be ...``; checked before anything is built."""

    @staticmethod
    def config_problems(block: Any) -> list[str]: ...


@runtime_checkable
class ReadsOracleFacts(Protocol):
    """Optional, on any configurable class (a system or one of its parts): the constructor parameter whose value
    ``"oracle"`` makes it read the gold facts a benchmark attaches (``Turn.oracle_facts``) in place of its own work.
    Such a run needs ``benchmark.oracle_facts: true``, or it would silently store nothing."""

    oracle_source_parameter: str


@runtime_checkable
class DeclaresRanking(Protocol):
    """Optional, on a system class: ``ranks_search`` false says ``search`` returns everything it holds unranked
    (a full-context system), so a retrieval-only run of it would score no ranking and is refused."""

    ranks_search: bool


@runtime_checkable
class LabelsRows(Protocol):
    """Optional, on a system class: the name of what a configuration measures where the system's own name would
    mislead (a setting that routes around the system's own mechanism), from the settings its record carries
    (``system_metrics`` and the command line's ``system.*`` values); None keeps the system's name."""

    @staticmethod
    def row_label(settings: dict[str, str]) -> str | None: ...


@runtime_checkable
class SummarisesMechanisms(Protocol):
    """Optional, on a system class: its recorded mechanism counts (``system_metrics.mechanisms``, in its own layout)
    as one flat table row, so a comparison can say which mechanism did the work."""

    @staticmethod
    def mechanism_row(mechanisms: dict[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class PublishesOwnCopy(Protocol):
    """Optional, on a benchmark class: what of a run folder may be published, when not all of it (a dataset whose
    licence forbids redistributing its text); ``publish_copy`` writes that part of ``run`` to ``target``."""

    @staticmethod
    def publish_copy(run: Any, target: Any, metrics: dict[str, Any] | None) -> None: ...


@runtime_checkable
class HasExtraTables(Protocol):
    """Optional, on a benchmark class: tables beyond its ``make_table`` (name -> DataFrame) that scripts/make_tables.py
    writes beside it from the same metrics.json dicts."""

    @staticmethod
    def make_extra_tables(metrics_list: list[dict[str, Any]]) -> dict[str, Any]: ...


@runtime_checkable
class DrawsFigures(Protocol):
    """Optional, on a benchmark class: figures (PNG files written into ``out``) from the same metrics.json dicts;
    scripts/make_tables.py prints where they went."""

    @staticmethod
    def make_figures(metrics_list: list[dict[str, Any]], out: Any) -> list[Any]: ...


@runtime_checkable
class DeclaresInputs(Protocol):
    """Optional, on a benchmark or system class: the constructor parameters that name input files (a dataset, a
    suite, an errata file, a server binary). Each one whose file exists is hashed into the run's identity
    (eval.provenance.input_hashes); a class that declares none has no input files."""

    input_parameters: tuple[str, ...]


@runtime_checkable
class UpgradesRecords(Protocol):
    """Optional, on a benchmark class: what an older record of its runs (``metadata.schema_version`` below the
    current) lacks that its row files still give, added when the record is read as the current version
    (eval.record ``RunMetrics.upgraded``, the one upgrader); ``folder`` is where the rows lie (None in memory)."""

    @staticmethod
    def upgrade_record(data: dict[str, Any], folder: Any, version: int) -> dict[str, Any]: ...
