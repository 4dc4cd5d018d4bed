"""The run record: metrics.json and provenance.json as typed models, written and read in one place.

Why a model: the keys every reader relies on (``failures.rows``, ``main_metric``, ``metadata.overrides``, the
folder a record was read from) were read by convention, each reader with its own ``.get(...) or {}``. Here they
are fields with types; everything a benchmark adds (its metric blocks) passes through as extra fields, so the
model never has to know a benchmark.

A record loads as it was written: the key order is kept and nothing is filled in, so ``dump()`` of a loaded
record is the same JSON as the file (the published runs round-trip byte for byte, which keeps their hashes).
``upgraded()`` is the one place an older record is read as the current version (``RECORD_VERSION``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from hydra.utils import get_class
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_serializer, model_validator

from core.api import HarnessError, UpgradesRecords
from core.atomic import write_json_atomic

# 1: commit and usage of the last invocation only; 2: input file hashes in the identity, code at start and end,
# usage over invocations (provenance.json)
RECORD_VERSION = 2
IDENTITY_KEYS = ("benchmark", "benchmark_target", "system", "ablation", "config_hash")
CONF = Path(__file__).resolve().parents[1] / "conf"
Part = Literal["benchmark", "system"]


class OrderedRecord(BaseModel):
    """A JSON object with typed known keys and any others passed through, dumped in the order it was read
    (declared fields would otherwise come first, and a reloaded record would differ from its file)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: Any) -> Any:
        model = handler(data)
        if isinstance(data, dict):
            model._order = tuple(data)
        return model

    @model_serializer(mode="wrap")
    def _in_read_order(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if not self._order:
            return out
        first = {key: out[key] for key in self._order if key in out}
        return {**first, **{key: value for key, value in out.items() if key not in first}}

    @classmethod
    def of(cls, data: OrderedRecord | dict[str, Any]) -> Self:
        """A record from its dict (as benchmarks' tables still pass metrics), or the record itself; a value of the
        wrong type fails naming its key."""
        if isinstance(data, cls):
            return data
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            source = data.get("_path", f"a {cls.__name__} dict") if isinstance(data, dict) else cls.__name__
            raise HarnessError(f"{source}: not a run record eval.record reads ({_first_error(err)}); was it written by eval.runner?") from err

    def dump(self) -> dict[str, Any]:
        """The JSON object as it is written: only keys that were read or set, none filled in by a default."""
        return self.model_dump(mode="python", exclude_unset=True, by_alias=True)


class Failures(OrderedRecord):
    """What the benchmark counted as failed: rows whose LLM call gave no usable output (a rerun retries them)
    and ingest writes the system reported as failed (kept: the rows were computed on that memory)."""

    rows: int = 0
    ingest_turns: int = 0


class RunMetadata(OrderedRecord):
    """``metrics.json``'s ``metadata``: what ran, on which code, inputs and models, with what usage. Fields
    a version-1 record lacks are None (``RunMetrics.upgraded`` fills what can be derived)."""

    schema_version: int = 1
    git_sha: str = "unknown"
    git_sha_start: str | None = None
    git_dirty: bool | None = None
    code_at_start: dict[str, Any] | None = None
    code_at_end: dict[str, Any] | None = None
    code_changed_during_run: bool | None = None
    input_files: dict[str, str] | None = None
    input_hash: str | None = None
    # what ran: every record eval.runner writes has them (RunMetrics.check_complete); a test's may lack them
    benchmark: str | None = None
    benchmark_target: str | None = None
    system: str | None = None
    system_target: str | None = None  # the system's class; records before it have it in config.yaml only
    ablation: str | None = None
    config_hash: str | None = None
    overrides: list[str] = Field(default_factory=list)  # the command line's Hydra overrides, as given
    invocations: int | None = None


class RecordedMetrics(OrderedRecord):
    """The keys the harness reads from a benchmark's metrics, finished or not (a table may be handed a dict
    without ``metadata``); everything else the benchmark reports passes through as extra fields."""

    metadata: RunMetadata = Field(default_factory=RunMetadata)
    main_metric: float | int | None = None
    failures: Failures | None = None
    system_metrics: dict[str, Any] | None = None
    system_metrics_scope: str | None = None
    # where the record was read from (never written): tables find a run's row files next to it
    source: Path | None = Field(default=None, alias="_path", exclude=True)

    @property
    def failed_rows(self) -> int:
        return self.failures.rows if self.failures else 0

    @property
    def has_main_metric(self) -> bool:
        """Whether the benchmark reports one main metric rather than a block of them (its ``main_metric`` key)."""
        return "main_metric" in self.model_fields_set

    @property
    def system_overrides(self) -> list[str]:
        """The ``system.*`` values the command line set, without the prefix (``retrieval.k=1``)."""
        return [o.removeprefix("system.") for o in self.metadata.overrides if o.startswith("system.")]

    @property
    def folder(self) -> Path | None:
        """The run folder the record was read from (its row files lie there), None for a record built in memory."""
        return Path(self.source).parent if self.source else None

    def recorded_class(self, part: Part) -> type | None:
        """The benchmark's or system's class this run used (``recorded_class``); None when nothing names one."""
        meta = self.metadata
        target, name = (meta.benchmark_target, meta.benchmark) if part == "benchmark" else (meta.system_target, meta.system)
        name = name or getattr(self, part, None)  # a benchmark's own block may name it at the top level
        return recorded_class([target, config_target(self.folder, part), conf_target(part, name)])


class RunMetrics(RecordedMetrics):
    """``metrics.json``: the benchmark's blocks (extra fields) plus the keys the harness reads and its metadata."""

    def check_complete(self) -> RunMetrics:
        """The record itself, after refusing one that does not say what ran (what every table groups by); the
        runner checks before it writes, readers take older or hand-made records as they are."""
        missing = [key for key in IDENTITY_KEYS if getattr(self.metadata, key) is None]
        if missing:
            raise HarnessError(f"metrics.json: metadata lacks {missing}; eval.runner writes them for every run")
        return self

    def as_table_input(self) -> dict[str, Any]:
        """The dict benchmarks' ``make_table`` reads, with the folder it came from under ``_path``."""
        return {**self.dump(), **({"_path": str(self.source)} if self.source else {})}

    def upgraded(self) -> RunMetrics:
        """This record read as the current version (``RECORD_VERSION``); the file is never rewritten. A version-1
        record gets what its fields imply (a ``-dirty`` commit is a dirty tree) and keeps None where nothing was
        recorded (the start code, the inputs, how many invocations); its benchmark adds what its rows still give
        (core.api.UpgradesRecords, e.g. summaries an older version did not write)."""
        meta = self.metadata
        if meta.schema_version >= RECORD_VERSION:
            return self
        data = self.dump()
        data["metadata"] = {**data.get("metadata", {}), "schema_version": RECORD_VERSION, "git_dirty": meta.git_sha.endswith("-dirty")}
        benchmark = self.recorded_class("benchmark")
        if isinstance(benchmark, UpgradesRecords):
            data = benchmark.upgrade_record(data, self.folder, meta.schema_version)
        upgraded = RunMetrics.model_validate(data)
        upgraded.source = self.source
        return upgraded


class Invocation(OrderedRecord):
    """One start of a run folder: its code, and, when it ended cleanly enough to say, its usage and counters."""

    code: dict[str, Any]
    code_changed_on_resume: bool = False
    llm_usage: dict[str, Any] | None = None
    judge_usage: dict[str, Any] | None = None
    wall_s: float | int | None = None
    ended_at: str | None = None
    ended_by: str | None = None
    system_metrics: dict[str, Any] | None = None
    system_did_work: bool | None = None  # whether it used the system (RunContext.system_did_work); None: not recorded


class ProvenanceRecord(OrderedRecord):
    """``provenance.json``: the code and inputs at the first start, one entry per invocation."""

    code_at_start: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    invocations: list[Invocation] = Field(default_factory=list)


@functools.cache
def _importable(target: str) -> type | None:
    try:
        return get_class(target)
    except Exception:  # a moved or removed class: the next candidate may still name it
        return None


def recorded_class(targets: Iterable[str | None]) -> type | None:
    """The first importable class among ``targets`` (class paths, most faithful first).

    Why here: eval/'s shared modules ask a run's benchmark and system what they declare (core.api's optional
    Protocols: a row's label, what publishing copies, a mechanism row) through the class the run named, never by
    matching its name; an old record's class path may have moved, so a later candidate (the conf group's current
    ``_target_`` for the recorded name) stands in."""
    for target in targets:
        found = _importable(str(target)) if target else None
        if found is not None:
            return found
    return None


def _yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping ({} when absent or damaged), read once per version of the file (a table asks per row)."""
    try:
        stat = path.stat()
    except OSError:
        return {}
    return _yaml_version(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=512)
def _yaml_version(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        data = None
    return data if isinstance(data, dict) else {}


def config_target(folder: Path | None, part: Part) -> str | None:
    """The ``_target_`` of ``part`` in a run folder's config.yaml (what the run was built from); None without one."""
    block = _yaml(folder / "config.yaml").get(part) if folder else None
    return str(block["_target_"]) if isinstance(block, dict) and block.get("_target_") else None


def conf_target(part: Part, name: str | None) -> str | None:
    """The ``_target_`` of conf/<part>/<name>.yaml: the class Hydra builds for that config name today."""
    if not name or not str(name).replace("_", "").replace("-", "").isalnum():
        return None
    target = _yaml(CONF / part / f"{name}.yaml").get("_target_")
    return str(target) if target else None


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise HarnessError(f"{path} is damaged: line {err.lineno}: not valid JSON ({err.msg}); rerun with overwrite=true to redo the run") from err
    except UnicodeDecodeError as err:
        raise HarnessError(f"{path} is damaged (not UTF-8: {err}); rerun with overwrite=true to redo the run") from err


def load_metrics(path: Path) -> RunMetrics:
    """metrics.json as written (no upgrade; ``upgraded()`` reads it as the current version)."""
    data = _read_json(path)
    try:
        record = RunMetrics.model_validate(data)
    except ValidationError as err:
        raise HarnessError(f"{path}: not a run record ({_first_error(err)}); rerun with overwrite=true to redo the run") from err
    record.source = path
    return record


def load_provenance(path: Path) -> ProvenanceRecord:
    data = _read_json(path)
    try:
        return ProvenanceRecord.model_validate(data)
    except ValidationError as err:
        raise HarnessError(f"{path}: not a provenance record ({_first_error(err)}); rerun with overwrite=true") from err


def write_record(path: Path, record: OrderedRecord) -> None:
    """A run folder's JSON record, indented, never half written (the form every published record has)."""
    write_json_atomic(path, record.dump(), indent=2, default=str)
