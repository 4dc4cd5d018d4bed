"""Mem0, A-Mem, Zep and MemGPT write several namespaces at once (run.workers) with the same result per namespace
as one at a time. Real libraries (and FalkorDB, Letta), the deterministic SIMULATED backend instead of a model:
the replies only need to be the same for the same request, which is what is compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.api import Turn
from core.llm.simulated_server import SimulatedLLM
from eval.workers import SystemGuard
from research.bench_concurrency import Unit, build, drive

pytestmark = [pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]

PEOPLE = [("Ana", "Ben", "painted a lake in Oslo"), ("Cleo", "Dev", "adopted a dog named Pip"), ("Eli", "Fay", "ran a race in Lima")]


def _units() -> list[Unit]:
    units = []
    for i, (a, b, news) in enumerate(PEOPLE):
        when = f"2023-05-0{i + 1}T13:56:00"  # a time of its own per namespace: a clock shared by them would show
        turns = (Turn("D1:1", a, f"Guess what, I {news} last week!", when), Turn("D1:2", b, f"Wow {a}, tell me more about it.", when))
        units.append(Unit(f"conc-{i}", ((when, turns),), (f"What did {a} do?",), when))
    return units


def _outcomes(name: str, workers: int, tmp_path: Path, embedder) -> list[dict]:
    llm = SimulatedLLM(latency={"fixed_s": 0.01, "decode_s_per_token": 0.0})
    system = build(name, llm, embedder, tmp_path / f"{name}-{workers}")
    try:
        assert SystemGuard(system).namespace_workers(workers) == workers  # the system declares parallel namespaces
        return drive(system, _units(), workers)
    finally:
        getattr(system, "close", lambda: None)()
        llm.close()


@pytest.mark.parametrize("name", ["mem0", "amem", "zep", "memgpt"])
def test_namespaces_written_at_once_give_the_serial_results(name, tmp_path, embedder):
    if name == "memgpt" and not (REPO / ".venv-letta" / "bin" / "letta").exists():
        pytest.skip("needs .venv-letta (bash scripts/setup_letta.sh)")
    serial = _outcomes(name, 1, tmp_path, embedder)
    concurrent = _outcomes(name, 3, tmp_path, embedder)
    assert concurrent == serial
    assert all(o["stored"] for o in serial)  # the simulated replies gave the library something to store
    assert sum(o["calls"] for o in serial) > 0
