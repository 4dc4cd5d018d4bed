"""HaluMem (arXiv 2511.03506): memory extraction, updating and QA, scored operation by operation.

Protocol, following HaluMem's own toolkit (MemTensor/HaluMem ``eval/eval_*.py`` and
``eval/evaluation.py``): for each user, sessions are added in order; right after each session

* extraction: every gold point of the session that is not a searched update (interference
  points included) is judged 0/1/2 against everything the system stored in that session, and
  every stored memory is judged for accuracy against the dialogue and the session's
  non-interference gold points;
* updating: each update point (``is_update == "True"`` with original memories) is searched with
  its own content (``update_k`` = 10 results) and judged Correct/Hallucination/Omission/Other;
* QA: each question of the session is searched (``qa_k`` = 20 results), answered by the shared
  answerer and judged Correct/Hallucination/Omission.

Sessions flagged ``is_generated_qa_session`` (HaluMem-Long filler) are added but not scored.
Systems that cannot list what they stored (not ``Inspectable``; Zep-like) get no extraction
metrics, as in the paper. Rows are appended as they are produced, so a killed run resumes
(memory state is rebuilt by replaying adds; the LLM cache makes that cheap).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from eval.benchmarks.halumem_clarify import CLARIFY_TABLES, clarify_metrics, clarify_session
from eval.context import RunContext
from eval.halumem_judge import HaluMemJudge, Verdict
from eval.metrics import bootstrap_ci
from core.api import AddReport, Inspectable, MemorySystem, StoredItem, Turn

log = logging.getLogger(__name__)

HUB_REPO = "IAAR-Shanghai/HaluMem"
HUB_FILES = {"Medium": "HaluMem-Medium.jsonl", "Long": "HaluMem-Long.jsonl"}
TIME_FORMAT = "%b %d, %Y, %H:%M:%S"
QUESTION_TYPES = (
    "Basic Fact Recall",
    "Multi-hop Inference",
    "Dynamic Update",
    "Memory Boundary",
    "Generalization & Application",
    "Memory Conflict",
)
MEMORY_TYPES = ("Persona Memory", "Event Memory", "Relationship Memory")
MEMORY_SOURCES = ("primary", "secondary", "interference", "system")
_NAME = re.compile(r"Name:\s*(.*?);\s*Gender:")
_RAW_UUID = re.compile(r'"uuid"\s*:\s*"([^"]+)"')

# Paper values (labelled column only; never mixed into results). MOSAIC paper, HaluMem-Medium.
PAPER_VALUES: dict[str, dict[str, float]] = {
    "paper: MOSAIC (HaluMem-Medium)": {
        "Extraction F1": 86.77,
        "QA correct": 73.10,
        "QA hallucination": 10.17,
        "QA omission": 16.74,
        "Update correct": 55.77,
    },
    "paper: MemOS (HaluMem-Medium)": {"Update correct": 62.11},
}

# ---------------------------------------------------------------------------------------
# Schema and loading
# ---------------------------------------------------------------------------------------
_TIME = {"type": "string"}  # format checked with strptime in parse_user (clearer message)
_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}
_TURN = {"type": "object", "required": ["role", "content"], "properties": {"role": _STR, "content": _STR, "timestamp": _TIME, "dialogue_turn": _INT}}
_MEMORY_POINT = {
    "type": "object",
    "required": ["index", "memory_content", "memory_type", "memory_source", "is_update", "original_memories", "timestamp", "importance"],
    "properties": {
        "index": {"type": "integer"},
        "memory_content": _STR,
        "memory_type": {"enum": list(MEMORY_TYPES)},
        "memory_source": {"enum": list(MEMORY_SOURCES)},
        "is_update": {"enum": ["True", "False"]},  # the published files store a string
        "original_memories": {"type": "array", "items": _STR},
        "timestamp": _TIME,
        "importance": {"type": "number", "minimum": 0, "maximum": 1},
    },
}
_QUESTION = {
    "type": "object",
    "required": ["question", "answer", "evidence", "difficulty", "question_type"],
    "properties": {
        "question": _STR,
        "answer": _STR,
        "evidence": {
            "type": "array",
            "items": {"type": "object", "required": ["memory_content", "memory_type"], "properties": {"memory_content": _STR, "memory_type": _STR}},
        },
        "difficulty": _STR,
        "question_type": {"enum": list(QUESTION_TYPES)},
    },
}
_SESSION = {
    "type": "object",
    "required": ["start_time", "end_time", "memory_points_count", "memory_points", "dialogue_turn_num", "dialogue", "dialogue_token_length"],
    "properties": {
        "start_time": _TIME,
        "end_time": _TIME,
        "memory_points_count": _INT,
        "memory_points": {"type": "array", "items": _MEMORY_POINT},
        "dialogue_turn_num": _INT,
        "dialogue": {"type": "array", "items": _TURN},
        "dialogue_token_length": _INT,
        "questions": {"type": "array", "items": _QUESTION},
        "question_count": _INT,
        "title": _STR,
        "is_generated_qa_session": {"type": "boolean"},
    },
    # Real sessions carry a timestamp and turn number on every utterance; Long's generated
    # filler sessions may not.
    "if": {"not": {"properties": {"is_generated_qa_session": {"const": True}}, "required": ["is_generated_qa_session"]}},
    "then": {"properties": {"dialogue": {"items": {"required": ["role", "content", "timestamp", "dialogue_turn"]}}}},
}
USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["uuid", "persona_info", "sessions", "total_dialogue_token_length", "total_question_count", "token_cost"],
    "properties": {
        "uuid": _STR,
        "persona_info": _STR,
        "sessions": {"type": "array", "items": _SESSION},
        "total_dialogue_token_length": _INT,
        "total_question_count": _INT,
        "token_cost": {"type": "object"},
    },
}
_VALIDATOR = Draft202012Validator(USER_SCHEMA)


class HaluMemSchemaError(ValueError):
    """A line of a HaluMem file does not follow the published schema; names file, line, user and field."""


@dataclass(frozen=True)
class DialogueTurn:
    role: str
    content: str
    timestamp: str | None
    dialogue_turn: int


@dataclass(frozen=True)
class MemoryPoint:
    index: int
    content: str
    memory_type: str
    memory_source: str
    is_update: bool
    original_memories: tuple[str, ...]
    timestamp: str
    importance: float

    @property
    def is_interference(self) -> bool:
        return self.memory_source == "interference"

    @property
    def is_searched_update(self) -> bool:
        """HaluMem searches (and scores as an update) only updates that name what they replace."""
        return self.is_update and bool(self.original_memories)


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    evidence: tuple[str, ...]
    difficulty: str
    question_type: str


@dataclass(frozen=True)
class Session:
    start_time: str
    end_time: str
    dialogue: tuple[DialogueTurn, ...]
    memory_points: tuple[MemoryPoint, ...]
    questions: tuple[Question, ...]
    title: str | None = None
    is_generated_qa_session: bool = False


@dataclass(frozen=True)
class HaluMemUser:
    uuid: str
    name: str
    persona_info: str
    sessions: tuple[Session, ...]


def _field_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<line>"


def halumem_time_to_iso(value: str | None, where: str = "timestamp") -> str | None:
    """'Dec 15, 2025, 08:41:23' -> '2025-12-15T08:41:23' (the protocol's session_time)."""
    if value is None:
        return None
    try:
        return datetime.strptime(value, TIME_FORMAT).isoformat()
    except ValueError as err:
        raise HaluMemSchemaError(f"{where}: {value!r} does not match {TIME_FORMAT!r}") from err


def parse_user(obj: Any, where: str = "<input>") -> HaluMemUser:
    """Validate one user object against the published schema and build typed records."""
    uuid = obj.get("uuid", "<no uuid>") if isinstance(obj, dict) else "<not an object>"
    error = best_match(_VALIDATOR.iter_errors(obj))
    if error is not None:
        raise HaluMemSchemaError(f"{where}: user {uuid}: field {_field_path(error.absolute_path)}: {error.message[:300]}")
    match = _NAME.search(obj["persona_info"])
    if not match:
        raise HaluMemSchemaError(f"{where}: user {uuid}: field persona_info: no 'Name: ...; Gender:' in it")
    sessions = []
    for s_idx, raw in enumerate(obj["sessions"]):
        at = f"{where}: user {uuid}: field sessions[{s_idx}]"
        for key in ("start_time", "end_time"):
            halumem_time_to_iso(raw[key], f"{at}.{key}")
        points = []
        for p_idx, point in enumerate(raw["memory_points"]):
            halumem_time_to_iso(point["timestamp"], f"{at}.memory_points[{p_idx}].timestamp")
            points.append(
                MemoryPoint(
                    index=point["index"],
                    content=point["memory_content"],
                    memory_type=point["memory_type"],
                    memory_source=point["memory_source"],
                    is_update=point["is_update"] == "True",
                    original_memories=tuple(point["original_memories"]),
                    timestamp=point["timestamp"],
                    importance=float(point["importance"]),
                )
            )
        turns = []
        for t_idx, turn in enumerate(raw["dialogue"]):
            if turn.get("timestamp") is not None:
                halumem_time_to_iso(turn["timestamp"], f"{at}.dialogue[{t_idx}].timestamp")
            turns.append(DialogueTurn(turn["role"], turn["content"], turn.get("timestamp"), int(turn.get("dialogue_turn", t_idx // 2))))
        questions = tuple(
            Question(q["question"], q["answer"], tuple(e["memory_content"] for e in q["evidence"]), q["difficulty"], q["question_type"])
            for q in raw.get("questions") or []
        )
        sessions.append(
            Session(
                start_time=raw["start_time"],
                end_time=raw["end_time"],
                dialogue=tuple(turns),
                memory_points=tuple(points),
                questions=questions,
                title=raw.get("title"),
                is_generated_qa_session=bool(raw.get("is_generated_qa_session", False)),
            )
        )
    return HaluMemUser(uuid=uuid, name=match.group(1).strip(), persona_info=obj["persona_info"], sessions=tuple(sessions))


def load_halumem_jsonl(path: str | Path) -> list[HaluMemUser]:
    """Read a HaluMem JSONL file (one user per line); the first bad line fails with its user and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"HaluMem file not found: {path} (see docs/halumem.md for how to get it)")
    users: list[HaluMemUser] = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                uuid = _RAW_UUID.search(line)
                who = f"user {uuid.group(1)}: " if uuid else ""
                raise HaluMemSchemaError(f"{path}:{line_no}: {who}not valid JSON: {err}") from err
            users.append(parse_user(obj, f"{path}:{line_no}"))
    if not users:
        raise HaluMemSchemaError(f"{path}: no users in the file")
    return users


def _drop_nulls(value: Any) -> Any:
    """Arrow fills fields a row lacks with null; the published JSON simply omits them."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def load_halumem_hub(variant: str = "Medium", repo: str = HUB_REPO, revision: str | None = None) -> list[HaluMemUser]:
    """Load HaluMem-<variant> from the Hugging Face hub via ``datasets`` (needs a network)."""
    if variant not in HUB_FILES:
        raise ValueError(f"halumem variant must be one of {sorted(HUB_FILES)}, got {variant!r}")
    try:
        import datasets  # optional: only this path needs it
    except ImportError as err:
        raise ImportError(
            "loading HaluMem from the hub needs the optional package `datasets` (pip install datasets); "
            "or download the JSONL yourself and pass halumem.path=<file> (docs/halumem.md)"
        ) from err
    data = datasets.load_dataset(repo, data_files=HUB_FILES[variant], split="train", revision=revision)
    return [parse_user(_drop_nulls(row), f"hf://{repo}/{HUB_FILES[variant]}#row{i}") for i, row in enumerate(data)]


# ---------------------------------------------------------------------------------------
# Metrics on judged rows (pure functions; HaluMem's "(all)" convention: a judge failure
# stays in the denominator and earns no credit, except target precision, whose
# denominator is the memories the judge placed in gold fields, as in HaluMem's code)
# ---------------------------------------------------------------------------------------
def _ci(point: float | None, samples: np.ndarray, n: int) -> dict[str, Any]:
    samples = samples[~np.isnan(samples)]
    if point is None or samples.size == 0:
        return {"mean": point, "ci_low": None, "ci_high": None, "n": n}
    low, high = np.percentile(samples, [2.5, 97.5])
    return {"mean": float(point), "ci_low": float(low), "ci_high": float(high), "n": n}


def _mean_metric(values: Sequence[float], n_boot: int, seed: int) -> dict[str, Any]:
    return bootstrap_ci(list(values), n_samples=n_boot, seed=seed)


def _ratio_metric(numerators: Sequence[float], denominators: Sequence[float], n_boot: int, seed: int) -> dict[str, Any]:
    """sum(num) / sum(den) with a percentile bootstrap over items."""
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    if num.size == 0 or den.sum() == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": int(num.size)}
    idx = np.random.default_rng(seed).integers(0, num.size, size=(n_boot, num.size))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    return _ci(float(num.sum() / den.sum()), boot, int(num.size))


def f1_score(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _resampled_means(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    return values[rng.integers(0, values.size, size=(n_boot, values.size))].mean(axis=1)


def extraction_metrics(integrity_rows: list[dict[str, Any]], accuracy_rows: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Recall, weighted recall, target precision, accuracy, false-memory resistance and F1.

    integrity rows: ``score`` (0/1/2 or None), ``importance``, ``is_interference``.
    accuracy rows: ``score`` (0/1/2 or None), ``in_gold_fields`` (bool or None).
    """
    gold = [r for r in integrity_rows if not r["is_interference"]]
    interference = [r for r in integrity_rows if r["is_interference"]]
    recall_hits = [1.0 if r["score"] == 2 else 0.0 for r in gold]
    target = [r for r in accuracy_rows if r["score"] is not None and r["in_gold_fields"] is True]
    target_values = [0.5 * r["score"] for r in target]
    out: dict[str, Any] = {
        "recall": _mean_metric(recall_hits, n_boot, seed),
        "weighted_recall": _ratio_metric(
            [0.5 * (r["score"] or 0) * r["importance"] for r in gold], [r["importance"] for r in gold], n_boot, seed
        ),
        "target_precision": _mean_metric(target_values, n_boot, seed),
        "accuracy": _mean_metric([0.5 * r["score"] if r["score"] is not None else 0.0 for r in accuracy_rows], n_boot, seed),
        "false_memory_resistance": _mean_metric([1.0 if r["score"] == 0 else 0.0 for r in interference], n_boot, seed),
    }
    precision, recall = out["target_precision"]["mean"], out["recall"]["mean"]
    point = f1_score(precision, recall)
    if point is None:
        out["f1"] = {"mean": None, "ci_low": None, "ci_high": None, "n": len(gold) + len(target)}
    else:  # the two samples are resampled independently
        rng = np.random.default_rng(seed)
        p = _resampled_means(np.asarray(target_values), n_boot, rng)
        r = _resampled_means(np.asarray(recall_hits), n_boot, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
        out["f1"] = _ci(point, boot, len(gold) + len(target))
    out["counts"] = {
        "gold_points": len(gold),
        "interference_points": len(interference),
        "stored_memories": len(accuracy_rows),
        "target_memories": len(target),
        "integrity_judge_failures": sum(r["score"] is None for r in integrity_rows),
        "accuracy_judge_failures": sum(r["score"] is None for r in accuracy_rows),
    }
    return out


def label_metrics(rows: list[dict[str, Any]], labels: Sequence[str], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Share of each label over all rows (a judge failure, ``label=None``, counts in the denominator)."""
    out: dict[str, Any] = {label.lower(): _mean_metric([1.0 if r["label"] == label else 0.0 for r in rows], n_boot, seed) for label in labels}
    out["judge_failures"] = sum(r["label"] is None for r in rows)
    out["n"] = len(rows)
    return out


def by_question_type(qa_rows: list[dict[str, Any]], labels: Sequence[str], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    return {
        qtype: label_metrics([r for r in qa_rows if r["question_type"] == qtype], labels, n_boot, seed)
        for qtype in QUESTION_TYPES
        if any(r["question_type"] == qtype for r in qa_rows)
    }


def by_memory_type(integrity_rows: list[dict[str, Any]] | None, update_rows: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per memory type: recall (gold points), update correctness, and HaluMem's combined accuracy.

    HaluMem's ``memory_acc`` = (integrity records scored 2 + updates judged Correct) / (all
    integrity records, interference included, + all update records), reproduced as ``combined``.
    """
    out: dict[str, Any] = {}
    integrity_rows = integrity_rows or []
    for mtype in MEMORY_TYPES:
        integ = [r for r in integrity_rows if r["memory_type"] == mtype]
        upd = [r for r in update_rows if r["memory_type"] == mtype]
        if not integ and not upd:
            continue
        gold = [r for r in integ if not r["is_interference"]]
        hits = [1.0 if r["score"] == 2 else 0.0 for r in integ] + [1.0 if r["label"] == "Correct" else 0.0 for r in upd]
        out[mtype] = {
            "recall": _mean_metric([1.0 if r["score"] == 2 else 0.0 for r in gold], n_boot, seed) if integrity_rows else None,
            "update_correct": _mean_metric([1.0 if r["label"] == "Correct" else 0.0 for r in upd], n_boot, seed),
            "combined": _mean_metric(hits, n_boot, seed) if integrity_rows else None,
        }
    return out


# ---------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------
def _snapshot_stored(system: Any, namespace: str) -> dict[tuple[str, str], StoredItem]:
    return {(item.memory_id, item.text): item for item in system.stored_items(namespace)}


def _dialogue_text(session: Session) -> str:
    return "\n".join(f"[{t.timestamp or session.start_time}] {t.role}: {t.content}" for t in session.dialogue)


@dataclass
class HaluMemBenchmark:
    """HaluMem on any ``MemorySystem``; see the module docstring for the protocol."""

    path: str | None = None
    variant: str | None = None  # Medium | Long: table label and hub file; None = from the file name
    hub_repo: str = HUB_REPO
    hub_revision: str | None = None
    name: str = "halumem"
    update_k: int = 10
    qa_k: int = 20
    extraction_source: str = "auto"  # auto | inspect | report | none
    limit_users: int | None = None
    limit_sessions: int | None = None
    judge_max_tokens: int = 200
    judge_attempts: int = 2
    bootstrap_samples: int = 1000
    seed: int = 0
    clarify: str = "off"  # off | oracle: answer clarification targets from gold points (halumem_clarify.py)
    clarify_budget: int = 3
    clarify_match_threshold: float = 0.5
    _users: list[HaluMemUser] | None = field(default=None, repr=False)

    @property
    def variant_label(self) -> str:
        """The variant named in tables: as configured, else guessed from the file name."""
        if self.clarify != "off":  # an oracle study is never a Table 2 column of the plain variant
            return f"{dataclasses.replace(self, clarify='off').variant_label}+{self.clarify}-clarify"
        if self.variant:
            return self.variant
        stem = Path(self.path).stem.lower() if self.path else "medium"
        return "Long" if "long" in stem else "Medium" if "medium" in stem else f"custom:{Path(str(self.path)).name}"

    def load(self) -> list[HaluMemUser]:
        if self._users is None:
            users = load_halumem_jsonl(self.path) if self.path else load_halumem_hub(self.variant_label, self.hub_repo, self.hub_revision)
            if self.limit_users is not None:
                users = users[: self.limit_users]
            self._users = users
        return self._users

    def _extraction_mode(self, system: MemorySystem) -> str:
        mode = self.extraction_source
        if mode not in ("auto", "inspect", "report", "none"):
            raise ValueError(f"halumem extraction_source must be auto|inspect|report|none, got {mode!r}")
        if mode == "auto":
            return "inspect" if isinstance(system, Inspectable) else "none"
        if mode == "inspect" and not isinstance(system, Inspectable):
            raise ValueError(f"system {getattr(system, 'name', system)!r} cannot list what it stored (not Inspectable); use extraction_source=report or none")
        return mode

    # -- running ----------------------------------------------------------------------------
    def run(self, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
        users = self.load()
        judge = HaluMemJudge(ctx.judge_llm, max_tokens=self.judge_max_tokens, attempts=self.judge_attempts)
        mode = self._extraction_mode(system)
        if self.clarify not in ("off", "oracle"):
            raise ValueError(f"benchmark.clarify must be off or oracle, got {self.clarify!r}")
        tables = ("sessions", "integrity", "accuracy", "updates", "qa", "users") + (CLARIFY_TABLES if self.clarify != "off" else ())
        rows = {name: ctx.rows(f"halumem_{name}") for name in tables}
        for user in users:
            if user.uuid in rows["users"]:
                continue
            self._run_user(user, system, ctx, judge, mode, rows)
            rows["users"].append({"key": user.uuid, "sessions": len(self._sessions(user))})
        return self.aggregate(
            {name: table.rows() for name, table in rows.items()},
            extraction_mode=mode,
            system_name=getattr(system, "name", type(system).__name__),
        )

    def _sessions(self, user: HaluMemUser) -> tuple[Session, ...]:
        return user.sessions if self.limit_sessions is None else user.sessions[: self.limit_sessions]

    def _run_user(self, user: HaluMemUser, system: MemorySystem, ctx: RunContext, judge: HaluMemJudge, mode: str, rows: dict[str, Any]) -> None:
        namespace = f"halumem-{user.uuid}"
        system.reset(namespace)
        held = _snapshot_stored(system, namespace) if mode == "inspect" else {}
        sessions = self._sessions(user)
        ctx.log.info("halumem user %s (%s): %d sessions", user.uuid, user.name, len(sessions))
        for s_idx, session in enumerate(sessions):
            key = f"{user.uuid}:{s_idx}"
            turns = [
                Turn(
                    turn_id=f"{s_idx}:{t.dialogue_turn}:{t.role}",
                    speaker=user.name if t.role == "user" else t.role,
                    text=t.content,
                    session_time=halumem_time_to_iso(t.timestamp or session.start_time),
                )
                for t in session.dialogue
            ]
            report: AddReport = system.add(namespace, turns, session_time=halumem_time_to_iso(session.start_time))
            if mode == "inspect":
                now = _snapshot_stored(system, namespace)
                stored = [item for k, item in now.items() if k not in held]
                held = now
            else:
                stored = list(report.stored) if mode == "report" else []
            rows["sessions"].append(
                {
                    "key": key,
                    "generated_qa_session": session.is_generated_qa_session,
                    "n_turns": len(turns),
                    "n_stored": len(stored),
                    "n_updated": len(report.updated),
                    "n_rejected": len(report.rejected),
                    "n_flagged": len(report.flagged),
                    "add_failures": report.failures,
                    "usage": report.usage.__dict__,
                }
            )
            if session.is_generated_qa_session:
                continue
            if self.clarify != "off":
                stored = clarify_session(self, user, s_idx, session, system, namespace, judge, mode, rows, stored)
                held = _snapshot_stored(system, namespace) if mode == "inspect" else held
            if mode != "none":
                self._judge_extraction(user, s_idx, session, [item.text for item in stored], judge, rows)
            self._judge_updates(user, s_idx, session, system, namespace, judge, rows)
            self._answer_questions(user, s_idx, session, system, namespace, ctx, judge, rows)

    def _judge_extraction(self, user: HaluMemUser, s_idx: int, session: Session, stored: list[str], judge: HaluMemJudge, rows: dict[str, Any]) -> None:
        for point in session.memory_points:
            key = f"{user.uuid}:{s_idx}:{point.index}"
            if point.is_searched_update or key in rows["integrity"]:
                continue
            if stored:
                verdict = judge.integrity(stored, point.content)
                score, failure, reason = verdict.value, verdict.failure, verdict.reason
            else:  # nothing stored: HaluMem scores 0 without asking the judge
                score, failure, reason = 0, None, "nothing stored in this session"
            rows["integrity"].append(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "memory_content": point.content,
                    "memory_type": point.memory_type,
                    "memory_source": point.memory_source,
                    "is_interference": point.is_interference,
                    "importance": point.importance,
                    "score": score,
                    "failure": failure,
                    "reason": reason,
                    "n_stored": len(stored),
                }
            )
        gold = [p.content for p in session.memory_points if not p.is_interference]
        dialogue = _dialogue_text(session)
        for m_idx, text in enumerate(stored):
            key = f"{user.uuid}:{s_idx}:m{m_idx}"
            if key in rows["accuracy"]:
                continue
            verdict = judge.accuracy(dialogue, gold, text)
            rows["accuracy"].append(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "memory": text,
                    "score": verdict.value,
                    "in_gold_fields": (verdict.extra or {}).get("in_gold_fields"),
                    "failure": verdict.failure,
                    "reason": verdict.reason,
                }
            )

    def _judge_updates(self, user: HaluMemUser, s_idx: int, session: Session, system: MemorySystem, namespace: str, judge: HaluMemJudge, rows: dict[str, Any]) -> None:
        for point in session.memory_points:
            key = f"{user.uuid}:{s_idx}:{point.index}"
            if not point.is_searched_update or key in rows["updates"]:
                continue
            returned = [item.text for item in system.search(namespace, point.content, self.update_k)]
            if returned:
                verdict = judge.update(returned, point.content, list(point.original_memories))
            else:  # nothing came back: the update is missing, no judge needed
                verdict = Verdict("Omission", "search returned nothing")
            rows["updates"].append(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "memory_content": point.content,
                    "original_memories": list(point.original_memories),
                    "memory_type": point.memory_type,
                    "importance": point.importance,
                    "returned": returned,
                    "label": verdict.value,
                    "failure": verdict.failure,
                    "reason": verdict.reason,
                }
            )

    def _answer_questions(self, user: HaluMemUser, s_idx: int, session: Session, system: MemorySystem, namespace: str, ctx: RunContext, judge: HaluMemJudge, rows: dict[str, Any]) -> None:
        for q_idx, question in enumerate(session.questions):
            key = f"{user.uuid}:{s_idx}:q{q_idx}"
            if key in rows["qa"]:
                continue
            retrieved = system.search(namespace, question.question, self.qa_k)
            answer = ctx.answerer.answer(question.question, retrieved, question_time=halumem_time_to_iso(session.end_time))
            verdict = judge.qa(question.question, question.answer, list(question.evidence), answer["text"])
            rows["qa"].append(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "question": question.question,
                    "question_type": question.question_type,
                    "difficulty": question.difficulty,
                    "gold": question.answer,
                    "response": answer["text"],
                    "n_retrieved": len(retrieved),
                    "answer_prompt_tokens": answer.get("prompt_tokens"),
                    "answer_latency_s": answer.get("latency_s"),
                    "label": verdict.value,
                    "failure": verdict.failure,
                    "reason": verdict.reason,
                }
            )

    # -- aggregation --------------------------------------------------------------------------
    def aggregate(self, rows: dict[str, list[dict[str, Any]]], extraction_mode: str, system_name: str) -> dict[str, Any]:
        n_boot, seed = self.bootstrap_samples, self.seed
        extraction = None
        if extraction_mode != "none":
            extraction = extraction_metrics(rows["integrity"], rows["accuracy"], n_boot, seed)
        updating = label_metrics(rows["updates"], ("Correct", "Hallucination", "Omission", "Other"), n_boot, seed)
        qa = label_metrics(rows["qa"], ("Correct", "Hallucination", "Omission"), n_boot, seed)
        sessions = rows["sessions"]
        return {
            "benchmark": self.name,
            "variant": self.variant_label,
            "system": system_name,
            "main_metric": qa["correct"]["mean"],
            "extraction_source": extraction_mode,
            "extraction": extraction,
            "extraction_skipped": None if extraction is not None else "the system cannot list what it stored (not Inspectable)",
            "updating": updating,
            "qa": qa,
            "by_question_type": by_question_type(rows["qa"], ("Correct", "Hallucination", "Omission"), n_boot, seed),
            "by_memory_type": by_memory_type(rows["integrity"] if extraction is not None else None, rows["updates"], n_boot, seed),
            "counts": {
                "users": len(rows["users"]),
                "sessions_added": len(sessions),
                "generated_qa_sessions_skipped": sum(r["generated_qa_session"] for r in sessions),
                "update_points": len(rows["updates"]),
                "questions": len(rows["qa"]),
                "add_failures": sum(r["add_failures"] for r in sessions),
                "conflicts": {k: sum(r[f"n_{k}"] for r in sessions) for k in ("updated", "rejected", "flagged")},
            },
            "bootstrap": {"samples": n_boot, "seed": seed, "confidence": 0.95, "unit": "item"},
            **({"clarify": clarify_metrics(self, rows, extraction_mode)} if self.clarify != "off" else {}),
        }

    # -- tables ---------------------------------------------------------------------------------
    @staticmethod
    def make_table(metrics: list[dict[str, Any]], convention: str | None = None) -> Any:
        """Table 2: one column per measured run (percent, 95% CI), then labelled paper columns."""
        import pandas as pd

        def cell(metric: dict[str, Any] | None) -> str:
            if not metric or metric.get("mean") is None:
                return "-"
            text = f"{100 * metric['mean']:.2f}"
            if metric.get("ci_low") is not None:
                text += f" [{100 * metric['ci_low']:.1f}, {100 * metric['ci_high']:.1f}]"
            return text

        row_specs: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any] | None]]] = [
            ("Extraction recall", lambda m: (m.get("extraction") or {}).get("recall")),
            ("Extraction weighted recall", lambda m: (m.get("extraction") or {}).get("weighted_recall")),
            ("Extraction target precision", lambda m: (m.get("extraction") or {}).get("target_precision")),
            ("Extraction accuracy", lambda m: (m.get("extraction") or {}).get("accuracy")),
            ("False-memory resistance", lambda m: (m.get("extraction") or {}).get("false_memory_resistance")),
            ("Extraction F1", lambda m: (m.get("extraction") or {}).get("f1")),
            ("Update correct", lambda m: m["updating"]["correct"]),
            ("Update hallucination", lambda m: m["updating"]["hallucination"]),
            ("Update omission", lambda m: m["updating"]["omission"]),
            ("QA correct", lambda m: m["qa"]["correct"]),
            ("QA hallucination", lambda m: m["qa"]["hallucination"]),
            ("QA omission", lambda m: m["qa"]["omission"]),
        ]
        columns: dict[str, list[str]] = {}
        for run in metrics:
            meta = run.get("metadata", {})
            label = f"{meta.get('system', run.get('system', '?'))} (HaluMem-{run.get('variant', '?')}, {meta.get('llm_model_id', '?')})"
            if meta.get("ablation") not in (None, "none"):
                label += f" [{meta['ablation']}]"
            columns[label] = [cell(getter(run)) for _, getter in row_specs]
        for paper_label, values in PAPER_VALUES.items():
            columns[paper_label] = [f"{values[name]:.2f}" if name in values else "" for name, _ in row_specs]
        table = pd.DataFrame(columns, index=[name for name, _ in row_specs])
        table.index.name = "metric (%)"
        return table

