"""HaluMem's published file format: JSON schema, typed records, and the JSONL / hub loaders.

Every line is validated before use; the first bad line fails naming the file, line, user and field.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from core.api import HarnessError

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


class HaluMemFileMissing(HarnessError, FileNotFoundError):
    """The HaluMem file named by benchmark.path does not exist."""


class HaluMemSchemaError(HarnessError, ValueError):
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


def load_halumem_jsonl(path: str | Path, content: bytes | None = None) -> list[HaluMemUser]:
    """Read a HaluMem JSONL file (one user per line; ``content``: its bytes, already read and checked by the
    run); the first bad line fails with its user and field."""
    path = Path(path)
    if content is None and not path.is_file():
        raise HaluMemFileMissing(f"HaluMem file not found: {path} (benchmark.path; see docs/halumem.md for how to get it)")
    users: list[HaluMemUser] = []
    with path.open(encoding="utf-8") if content is None else io.StringIO(content.decode("utf-8"), newline=None) as handle:
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
