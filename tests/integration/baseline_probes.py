"""Shared inputs of the Mem0 / A-Mem live tests: a LoCoMo slice and contradiction probes."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from mosaic.protocol import Turn

LOCOMO = Path(os.environ.get("MOSAIC_DATA_DIR", Path(__file__).resolve().parents[2] / "data")) / "locomo10.json"

# (held fact, contradicting fact): the suite's shape, written for these tests.
PROBES = [
    ("I live in Paris and I love the cafes there.", "I moved to Berlin last month, so I don't live in Paris anymore."),
    ("I work as a high school teacher.", "I quit teaching; I now work as a nurse at the city hospital."),
]


def locomo_slice(n_turns: int) -> tuple[list[Turn], str]:
    """The first ``n_turns`` turns of LoCoMo conversation 0, session 1, with the session's ISO time."""
    if not LOCOMO.exists():
        pytest.fail(f"LoCoMo file {LOCOMO} is missing (set MOSAIC_DATA_DIR or run the data download script)")
    conversation = json.loads(LOCOMO.read_text())[0]["conversation"]
    when = datetime.strptime(conversation["session_1_date_time"], "%I:%M %p on %d %B, %Y").isoformat()
    turns = [Turn(t["dia_id"], t["speaker"], t["text"], when) for t in conversation["session_1"][:n_turns]]
    return turns, when
