"""research.halumem_link_calibration: can the conflict check's k-nearest step reach the memory an update replaces?"""

from __future__ import annotations

import pytest

from eval.benchmarks.halumem.data import load_halumem_jsonl
from research.halumem_link_calibration import candidate_ranks, main
from tests.conftest import REPO
from tests.fakes import HashEmbedder

TINY = REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl"


def test_ranks_are_counted_only_for_updates_whose_replaced_memory_is_held():
    ranks = candidate_ranks(TINY, HashEmbedder(dim=256), threshold=0.99)
    # the tiny file's verbatim originals ("... director at Huaxin ...", "... lives in Berlin.") are held; the
    # half-marathon update replaces a memory no earlier point states, so it is not counted
    assert len(ranks) == 2
    # each (rank, cosine) is recomputed here from the fixture's texts: the update point against the held point it
    # replaces, which is the nearest of the user's earlier points in both cases
    embedder = HashEmbedder(dim=256)
    points = {p.content: p for user in load_halumem_jsonl(TINY) for session in user.sessions for p in session.memory_points}

    def cosine(a: str, b: str) -> float:
        return float(embedder.encode([a])[0] @ embedder.encode([b])[0])

    updates = [p for p in points.values() if p.is_searched_update and p.original_memories[0] in points]
    assert ranks == [(1, pytest.approx(cosine(p.content, p.original_memories[0]))) for p in updates]


def test_the_evaluation_user_is_refused(capsys):
    assert main(["--file", "data/halumem-pilot/halumem_medium_user3.jsonl"]) == 2
    assert "evaluation user" in capsys.readouterr().err
