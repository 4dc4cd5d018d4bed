"""The injected-conflict suite format (docs/conflict_suite.md): loading, validation, turn ids.

Kept apart from the benchmark so that tools (the dev-split tuner, tests) can read suites
without the runner. A malformed suite fails on load with the case id and the field at fault.

Every suite says which split it belongs to: ``"dev"`` suites may shape code, prompts and
thresholds; ``"eval"`` suites are for reporting only. ``require_dev_suite`` is the gate every
calibration tool calls: it refuses a suite marked eval and, whatever the file is called or says
about itself, a suite whose content fingerprint is that of a known evaluation suite.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.api import HarnessError, Turn

CONFLICT_TYPES = ("numeric", "semantic", "logical")
SPLITS = ("dev", "eval")

# Content fingerprints (``suite_fingerprint``) of the evaluation suites: a renamed or relabelled
# copy of one of them is still refused by ``require_dev_suite``. A test checks that every suite
# under data/conflicts marked "eval" is listed here.
EVAL_SUITE_FINGERPRINTS: dict[str, str] = {
    "hypertension": "dfc80b15b59b881379699cc7e2f4a13d887c75bc04720fb659bfcc74bd9bd332",
}


class SuiteFormatError(HarnessError, ValueError):
    """The suite file breaks the format; the message names the file, case id and field."""


@dataclass(frozen=True)
class SuiteCase:
    id: str
    context: str
    probe_speaker: str
    probe_text: str
    conflict: bool
    type: str | None
    explicit: bool | None
    conflicts_with: tuple[int, ...]


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    contexts: dict[str, list[dict[str, str]]]
    cases: list[SuiteCase]
    split: str = "dev"
    path: str = ""
    fingerprint: str = ""

    def context_turns(self, context_id: str, session_time: str | None = None) -> list[Turn]:
        """The context's turns with the ids the benchmark scores against: ``"<context>:<index>"``."""
        return [
            Turn(turn_id=turn_id(context_id, i), speaker=t["speaker"], text=t["text"], session_time=session_time)
            for i, t in enumerate(self.contexts[context_id])
        ]

    def probe_turn(self, case: SuiteCase, session_time: str | None = None) -> Turn:
        return Turn(turn_id=f"probe:{case.id}", speaker=case.probe_speaker, text=case.probe_text, session_time=session_time)

    def gold_turn_ids(self, case: SuiteCase) -> set[str]:
        return {turn_id(case.context, i) for i in case.conflicts_with}


def turn_id(context_id: str, index: int) -> str:
    return f"{context_id}:{index}"


def _fail(where: str, case_id: str | None, field: str, why: str) -> SuiteFormatError:
    who = f"case {case_id!r}" if case_id is not None else "suite"
    return SuiteFormatError(f"{where}: {who}, field {field!r}: {why}")


def _turn(where: str, case_id: str | None, field: str, raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise _fail(where, case_id, field, f"must be an object with speaker and text, got {type(raw).__name__}")
    for key in ("speaker", "text"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _fail(where, case_id, f"{field}.{key}", "must be a non-empty string")
    return {"speaker": raw["speaker"], "text": raw["text"]}


def parse_suite(data: Any, where: str = "<suite>") -> Suite:
    """Validate a decoded suite and build a ``Suite``; raises SuiteFormatError on the first fault."""
    if not isinstance(data, dict):
        raise _fail(where, None, "<root>", "must be a JSON object")
    for key, kind in (("name", str), ("description", str), ("contexts", dict), ("cases", list)):
        if not isinstance(data.get(key), kind):
            raise _fail(where, None, key, f"missing or not a {kind.__name__}")
    if data.get("split") not in SPLITS:
        raise _fail(where, None, "split", f"must be one of {SPLITS} (dev suites may shape code; eval suites only report), got {data.get('split')!r}")
    contexts: dict[str, list[dict[str, str]]] = {}
    for ctx_id, turns in data["contexts"].items():
        if not isinstance(turns, list) or not turns:
            raise _fail(where, None, f"contexts.{ctx_id}", "must be a non-empty list of turns")
        contexts[ctx_id] = [_turn(where, None, f"contexts.{ctx_id}[{i}]", t) for i, t in enumerate(turns)]
    cases: list[SuiteCase] = []
    seen: set[str] = set()
    for n, raw in enumerate(data["cases"]):
        if not isinstance(raw, dict):
            raise _fail(where, f"#{n}", "<case>", "must be an object")
        case_id = raw.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise _fail(where, f"#{n}", "id", "must be a non-empty string")
        if case_id in seen:
            raise _fail(where, case_id, "id", "appears more than once")
        seen.add(case_id)
        ctx = raw.get("context")
        if ctx not in contexts:
            raise _fail(where, case_id, "context", f"{ctx!r} is not one of the suite's contexts {sorted(contexts)}")
        probe = _turn(where, case_id, "probe", raw.get("probe"))
        conflict = raw.get("conflict")
        if not isinstance(conflict, bool):
            raise _fail(where, case_id, "conflict", "must be true or false")
        ctype, explicit, refs = raw.get("type"), raw.get("explicit"), raw.get("conflicts_with")
        if not isinstance(refs, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in refs):
            raise _fail(where, case_id, "conflicts_with", "must be a list of context turn indices")
        for i in refs:
            if not 0 <= i < len(contexts[ctx]):
                raise _fail(where, case_id, "conflicts_with", f"index {i} is outside context {ctx!r} (0..{len(contexts[ctx]) - 1})")
        if conflict:
            if ctype not in CONFLICT_TYPES:
                raise _fail(where, case_id, "type", f"a conflicting case needs one of {CONFLICT_TYPES}, got {ctype!r}")
            if not isinstance(explicit, bool):
                raise _fail(where, case_id, "explicit", "a conflicting case needs true or false")
            if not refs:
                raise _fail(where, case_id, "conflicts_with", "a conflicting case must name at least one context turn")
        else:
            if ctype is not None:
                raise _fail(where, case_id, "type", "must be null for a non-conflicting case")
            if explicit is not None:
                raise _fail(where, case_id, "explicit", "must be null for a non-conflicting case")
            if refs:
                raise _fail(where, case_id, "conflicts_with", "must be empty for a non-conflicting case")
        cases.append(SuiteCase(case_id, ctx, probe["speaker"], probe["text"], conflict, ctype, explicit, tuple(refs)))
    if not cases:
        raise _fail(where, None, "cases", "the suite has no cases")
    return Suite(data["name"], data["description"], contexts, cases, data["split"], where, suite_fingerprint(data))


def suite_fingerprint(data: dict[str, Any]) -> str:
    """sha256 of a suite's contexts and cases in canonical JSON: the same for a renamed,
    re-described, relabelled (``split``) or reformatted copy."""
    content = {"contexts": data.get("contexts"), "cases": data.get("cases")}
    return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()


class EvaluationSuiteError(HarnessError, ValueError):
    """A calibration tool was handed an evaluation suite (by its split field or its content)."""


def require_dev_suite(suite: Suite) -> Suite:
    """Return ``suite`` if calibration may use it; raise EvaluationSuiteError for an eval suite."""
    if suite.split != "dev":
        raise EvaluationSuiteError(f"{suite.path}: field 'split' is {suite.split!r}: evaluation suites never shape code; calibrate on a dev suite (data/conflicts/household_finance.json, workplace_policy.json)")
    known = {fp: name for name, fp in EVAL_SUITE_FINGERPRINTS.items()}
    if suite.fingerprint in known:
        raise EvaluationSuiteError(f"{suite.path}: its contexts and cases are those of the evaluation suite {known[suite.fingerprint]!r} (content fingerprint), whatever its name or split field says; calibrate on a dev suite")
    return suite


def load_suite(path: str | Path, content: bytes | None = None) -> Suite:
    """Parse a suite file (``content``: its bytes, when the run has read and checked them)."""
    path = Path(path)
    if content is None and not path.exists():
        raise SuiteFormatError(f"{path}: suite file does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8") if content is None else content)
    except json.JSONDecodeError as err:
        raise SuiteFormatError(f"{path}: not valid JSON: {err}") from err
    return parse_suite(data, str(path))
