"""LoCoMo gold-answer errata from the public audit (github.com/dial481/locomo-audit, errors.json).

The audit lists 156 questions: 99 whose gold answer is wrong in a way that changes scores
(hallucinated, temporal, attribution, ambiguous, incomplete) and 57 whose only error is the
cited evidence. ``audited_excluded`` scoring drops the score-changing ones. Entries are matched
on (conversation position in locomo10.json, index in its ``qa`` list), never on question text
(some texts repeat); only ids and error types are kept from the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GOLD_MODES = ("original", "audited_excluded")
# Error types that leave the gold answer right (only the evidence ids are wrong): no score changes.
EVIDENCE_ONLY_ERRORS = frozenset({"WRONG_CITATION"})
_QUESTION_ID = re.compile(r"locomo_(\d+)_qa(\d+)")


class AuditFormatError(ValueError):
    """errors.json is missing or malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Erratum:
    conversation: int  # position in locomo10.json (0 = conv-26)
    qa_index: int  # 0-based index into that conversation's qa list
    error_type: str

    @property
    def changes_score(self) -> bool:
        return self.error_type not in EVIDENCE_ONLY_ERRORS


def load_errata(path: str | Path, content: bytes | None = None) -> list[Erratum]:
    """Parse errors.json (or ``content``, its bytes as the run read them) into (conversation, qa index, error
    type); nothing else is kept."""
    path = Path(path)
    if content is None and not path.is_file():
        raise AuditFormatError(f"{path}: audit errata not found (get them with `python -m scripts.download_data`)")
    try:
        entries = json.loads(path.read_text(encoding="utf-8") if content is None else content)
    except json.JSONDecodeError as err:
        raise AuditFormatError(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from err
    if not isinstance(entries, list):
        raise AuditFormatError(f"{path}: expected a list of entries, got {type(entries).__name__}")
    errata = []
    for i, entry in enumerate(entries):
        question_id, error_type = (entry.get(k) if isinstance(entry, dict) else None for k in ("question_id", "error_type"))
        match = _QUESTION_ID.fullmatch(str(question_id))
        if not match or not isinstance(error_type, str):
            raise AuditFormatError(f"{path}: entry [{i}]: needs question_id 'locomo_<i>_qa<j>' and error_type, got {question_id!r}, {error_type!r}")
        errata.append(Erratum(int(match.group(1)), int(match.group(2)), error_type))
    return errata


def score_changing_positions(errata: list[Erratum]) -> frozenset[tuple[int, int]]:
    """(conversation position, qa index) of every erratum whose gold answer is wrong."""
    return frozenset((e.conversation, e.qa_index) for e in errata if e.changes_score)


def audited_keys(predictions: list[dict[str, Any]], positions: dict[str, int], errata_path: str | Path, content: bytes | None = None) -> set[str]:
    """Keys of the predictions whose (conversation position, qa index) the audit marks score-changing
    (``content``: the errata file's bytes, when the run has read and checked them)."""
    wrong = score_changing_positions(load_errata(errata_path, content))
    return {p["key"] for p in predictions if (positions[p["sample_id"]], int(p["qa_index"])) in wrong}
