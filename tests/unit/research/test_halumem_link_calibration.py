"""research.halumem_link_calibration: can the conflict check's k-nearest step reach the memory an update replaces?"""

from __future__ import annotations

from research.halumem_link_calibration import candidate_ranks, main
from tests.conftest import REPO
from tests.fakes import HashEmbedder

TINY = REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl"


def test_ranks_are_counted_only_for_updates_whose_replaced_memory_is_held():
    ranks = candidate_ranks(TINY, HashEmbedder(dim=256), threshold=0.99)
    # the tiny file's verbatim originals ("... director at Huaxin ...", "... lives in Berlin.") are held; the
    # half-marathon update replaces a memory no earlier point states, so it is not counted
    assert len(ranks) == 2
    assert all(rank >= 1 and -1.0 <= cosine <= 1.0 for rank, cosine in ranks)
    assert (1, ranks[1][1]) == ranks[1]  # "lives in Munich" is nearest to "lives in Berlin" among the user's earlier points


def test_the_evaluation_user_is_refused(capsys):
    assert main(["--file", "data/halumem-pilot/halumem_medium_user3.jsonl"]) == 2
    assert "evaluation user" in capsys.readouterr().err
