"""eval.config_checks asks a run's classes what to check (core.api Protocols), never their names: a benchmark's own
keys (ChecksOwnConfig), a setting that reads gold facts (ReadsOracleFacts, in the system block or a block inside it),
a system whose search ranks nothing (DeclaresRanking). A class renamed or added is checked the same way."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from eval.config_checks import problems


class ListsItsOwnProblems:
    """A benchmark with a key only it knows."""

    def __init__(self, name: str = "mine", colours: Any = None, oracle_facts: bool = False) -> None: ...

    @staticmethod
    def config_problems(block: Any) -> list[str]:
        bad = [c for c in block.get("colours") or [] if c not in ("red", "blue")]
        return [f"benchmark.colours has {bad}: each must be red or blue"] if bad else []


class ReadsGoldThroughMode:
    """A system part whose switch to gold facts is ``mode``, not ``source``."""

    oracle_source_parameter = "mode"

    def __init__(self, mode: str = "model") -> None: ...


class HandsBackEverything:
    ranks_search = False

    def __init__(self, name: str = "everything") -> None: ...


def _cfg(system: dict[str, Any], benchmark: dict[str, Any] | None = None) -> Any:
    benchmark = benchmark or {"_target_": f"{__name__}.ListsItsOwnProblems", "name": "mine"}
    return OmegaConf.create({"system": system, "benchmark": benchmark})


def test_a_benchmark_checks_its_own_keys():
    bench = {"_target_": f"{__name__}.ListsItsOwnProblems", "name": "mine", "colours": ["red", "green"]}
    assert problems(_cfg({}, bench)) == ["benchmark.colours has ['green']: each must be red or blue"]
    assert problems(_cfg({}, {**bench, "colours": ["blue"]})) == []
    # the same key on a benchmark that does not check it is its constructor's business, not this module's
    assert problems(_cfg({}, {"_target_": "eval.benchmarks.halumem.HaluMemBenchmark", "name": "h", "colours": ["green"]})) == []


def test_an_oracle_switch_is_the_setting_its_class_declares_wherever_the_block_sits():
    part = {"_target_": f"{__name__}.ReadsGoldThroughMode", "mode": "oracle"}
    assert any("system.reader.mode=oracle reads the benchmark's gold facts" in p for p in problems(_cfg({"reader": part})))
    assert any("system.mode=oracle" in p for p in problems(_cfg(part)))
    with_facts = {"_target_": f"{__name__}.ListsItsOwnProblems", "name": "mine", "oracle_facts": True}
    assert problems(_cfg({"reader": part}, with_facts)) == []
    # a key named like a switch on a class that declares none is left alone
    assert problems(_cfg({"_target_": f"{__name__}.HandsBackEverything", "source": "oracle", "mode": "oracle"})) == []


def test_a_retrieval_only_run_of_a_system_that_ranks_nothing_is_refused():
    bench = {"_target_": f"{__name__}.ListsItsOwnProblems", "name": "mine", "stages": ["ingest", "retrieve"]}
    everything = {"_target_": f"{__name__}.HandsBackEverything", "name": "everything"}
    assert any("everything retrieves everything it holds" in p for p in problems(_cfg(everything, bench)))
    assert problems(_cfg(everything, {**bench, "stages": ["ingest", "retrieve", "answer"]})) == []
    assert problems(_cfg({"_target_": "baselines.rag.RagMemory", "name": "rag"}, bench)) == []  # rag ranks
