"""The two published sweeps compose job by job, and each k of the conflict sweep changes what the detector judges.

Running the sweeps takes hours of LLM time on a CPU; these checks cost seconds: every job's
config composes and carries its value, and the detector (on a stand-in graph, no LLM) is handed
the k nearest held facts for each k of the sweep.
"""

from __future__ import annotations

import numpy as np
import pytest

from mosaic.conflict import ConflictDetector
from mosaic.entity import Entity
from tests.fakes import FakeLLM
from tests.unit.eval.test_runner import _compose


def _jobs(experiment: str) -> list[tuple[str, str]]:
    params = _compose([f"experiment={experiment}"]).hydra.sweeper.params
    return [(key, value.strip()) for key, values in params.items() for value in str(values).split(",")]


def test_ablation_sweep_jobs_compose_and_name_their_run():
    jobs = _jobs("sweep_mosaic_ablations")
    assert [v for _, v in jobs] == ["no_ncs", "no_gate", "no_conflict", "no_lsh"]
    for key, value in jobs:
        cfg = _compose(["experiment=sweep_mosaic_ablations", f"{key}={value}"])
        assert cfg.ablation_name == value and cfg.system.name == "mosaic" and cfg.benchmark.max_sessions == 3


def test_k_sweep_jobs_compose_with_their_k():
    jobs = _jobs("sweep_conflict_k")
    assert [(k, int(v)) for k, v in jobs] == [("system.conflict.k", k) for k in (1, 3, 5, 10)]
    for key, value in jobs:
        cfg = _compose(["experiment=sweep_conflict_k", f"{key}={value}"])
        # the sweep itself names the dev suite: k is never chosen on the eval suite
        assert cfg.system.conflict.k == int(value) and cfg.benchmark.suite.endswith("household_finance.json")


class _Line:
    """Twelve held facts at falling cosine to the newcomer, no graph neighbours (a stand-in for MemoryGraph)."""

    def __init__(self) -> None:
        dim = 16
        self.new = np.eye(dim)[0]
        self.held = []
        for i in range(12):
            vec = 0.9 * (1 - 0.05 * i) * np.eye(dim)[0] + 0.4 * np.eye(dim)[1 + i % (dim - 1)]
            self.held.append((Entity(f"h{i}", f"held fact number {chr(97 + i)} about the plan", "event"), vec / np.linalg.norm(vec)))

    def nearest(self, vector, k, exclude=frozenset()):
        return [(e, float(v @ vector)) for e, v in self.held if e.entity_id not in exclude][:k]

    def neighbours(self, entity_id):
        return []

    def vector(self, entity_id):
        return next(v for e, v in self.held if e.entity_id == entity_id) if entity_id != "new" else self.new

    def embed(self, text):
        return self.new


def _facts_judged(k: int) -> int:
    cfg = _compose(["experiment=sweep_conflict_k", f"system.conflict.k={k}"]).system.conflict
    detector = ConflictDetector(FakeLLM(lambda m, s: "true"), k=cfg.k, n_facts=cfg.n_facts, mode=cfg.mode, threshold=cfg.threshold)
    seen: list[int] = []
    detector._ask = lambda new, facts: (seen.append(len(facts)) or (0.0, [], [], ""))  # no LLM: record what it would judge
    detector.check(Entity("new", "the newcomer says something else about the plan", "event"), _Line())
    return seen[0]


@pytest.mark.parametrize("k", [1, 3, 5, 10])
def test_each_k_is_what_the_detector_judges(k):
    assert _facts_judged(k) == k
