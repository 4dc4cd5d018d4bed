"""Every experiment config runs end to end through ``eval.runner.run`` on a fake LLM and a tiny slice.

The equivalent of ``python run.py -m experiment=glob(*)`` for wiring: each non-sweep experiment
file (conf/experiment/*.yaml) is composed as run.py would, its LLM and embedder are swapped for
fakes (tests/fakes.py), its data for a few turns and questions, and the run must write
metrics.json and a table. Sweep files are composed, and so is every job their sweeper would
launch. A fake LLM says nothing about quality: this tests that configs build and run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf, open_dict

from eval.runner import config_hash, run, validate
from tests.hydra_config import CONF, compose_config, options

REPO = CONF.parent
HALUMEM_TINY = REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl"
DEV_SUITE = REPO / "data" / "conflicts" / "household_finance.json"


def _is_sweep(name: str) -> bool:
    raw = OmegaConf.load(CONF / "experiment" / f"{name}.yaml")
    return OmegaConf.select(raw, "hydra.mode", default=None) == "MULTIRUN"


EXPERIMENTS = [name for name in options("experiment") if not _is_sweep(name)]
SWEEPS = [name for name in options("experiment") if _is_sweep(name)]


def _tiny_locomo(path: Path) -> Path:
    """Two sessions, four questions, shaped like locomo10.json (invented text)."""
    conversation = {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I started learning the cello last week."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice! I adopted a grey cat called Pixel."},
        ],
        "session_2_date_time": "2:00 pm on 9 June, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "My cello teacher lives in Porto."},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "Pixel broke a vase yesterday."},
        ],
    }
    qa = [
        {"question": "What instrument is Ana learning?", "answer": "cello", "evidence": ["D1:1"], "category": 4},
        {"question": "What is Ben's cat called?", "answer": "Pixel", "evidence": ["D1:2"], "category": 4},
        {"question": "Where does Ana's teacher live?", "answer": "Porto", "evidence": ["D2:1"], "category": 4},
        {"question": "When did Ben adopt his cat?", "answer": "May 2023", "evidence": ["D1:2"], "category": 2},
    ]
    path.write_text(json.dumps([{"sample_id": "conv-smoke", "conversation": conversation, "qa": qa}]), encoding="utf-8")
    return path


def _slice(name: str, tmp_path: Path) -> list[str]:
    """Overrides that shrink each experiment to a few turns and questions (data never from eval splits)."""
    slices = {
        "locomo": [f"benchmark.path={_tiny_locomo(tmp_path / 'locomo_tiny.json')}", "benchmark.conversations=null",
                   "benchmark.max_sessions=2", "benchmark.max_questions=4"],
        "halumem": [f"halumem.path={HALUMEM_TINY}", "benchmark.limit_users=1", "benchmark.limit_sessions=2"],
        "conflict": [f"conflict.suite={DEV_SUITE}", "benchmark.cases_per_group=1"],
    }  # fmt: skip
    slices["locomo_conv26"] = slices["locomo_conv49"] = slices["locomo"]  # whole-conversation runs: same tiny data
    slices["halumem_dev"] = slices["halumem_eval"] = slices["halumem"]  # the pilot users' runs: the fixture, never user 3
    slices["locomo_retrieval"], slices["halumem_retrieval"] = slices["locomo"], slices["halumem"]  # retrieval only: same data
    assert name in slices, f"experiment {name!r} has no smoke slice: add one here"
    return slices[name]


# items each slice scores: LoCoMo questions, conflict cases (one per type + one compatible probe),
# HaluMem questions in the first two sessions of the fixture's first user
EXPECTED_ITEMS = {"locomo": 4, "locomo_conv26": 4, "locomo_conv49": 4, "conflict": 4, "halumem": 6, "halumem_dev": 6, "halumem_eval": 6}


def _on_fakes(cfg: DictConfig, tmp_path: Path) -> DictConfig:
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"_target_": "tests.fakes.SchemaFakeLLM"})
        cfg.judge.llm = None
        cfg.embedder = OmegaConf.create({"_target_": "tests.fakes.HashEmbedder"})
        cfg.logger = OmegaConf.create({"_target_": "eval.loggers.NullLogger"})
        cfg.results_dir = str(tmp_path / "results")
        cfg.cache_dir = str(tmp_path / "cache")
        cfg.benchmark.bootstrap_samples = 50
        del cfg["hydra"]  # as run.py hands it over: Hydra's own node is not part of the job config
    return cfg


def test_every_experiment_has_a_slice_or_is_a_sweep():
    assert EXPERIMENTS and set(EXPERIMENTS) | set(SWEEPS) == set(options("experiment"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_runs_end_to_end_on_a_fake_llm(name, tmp_path):
    overrides = [f"experiment={name}", *_slice(name, tmp_path)]
    cfg = _on_fakes(compose_config(overrides), tmp_path)
    metrics = run(cfg, overrides)
    meta = metrics["metadata"]
    assert meta["benchmark"] == cfg.benchmark.name and meta["system"] == cfg.system.name
    retrieval_only = list(cfg.benchmark.get("stages") or []) == ["ingest", "retrieve"]
    if retrieval_only:  # searches only: no answer, no judgement; every question searched (tests/unit/eval/benchmarks/*/test_*_retrieval.py score them)
        run_dir = next((tmp_path / "results" / "runs").glob("*/*/*/*/"))
        rows = next(run_dir.glob("*retrievals.jsonl")).read_text().splitlines()
        assert meta["llm_usage"]["calls"] == 0 and rows
        return
    assert meta["llm_model_id"] == "fake-schema" and meta["llm_usage"]["calls"] > 0
    run_dir = next((tmp_path / "results" / "runs").glob("*/*/*/*/"))
    assert json.loads((run_dir / "metrics.json").read_text())["metadata"]["config_hash"] == run_dir.name
    assert (run_dir / "table.md").read_text().strip()
    scored = {"locomo": lambda m: m["overall"]["n"], "conflict": lambda m: m["n_cases"], "halumem": lambda m: m["counts"]["questions"]}
    assert scored[cfg.benchmark.name](metrics) == EXPECTED_ITEMS[name], "the slice did not run every item"


def _sweep_jobs(name: str) -> list[list[str]]:
    """The override lists Hydra's basic sweeper launches for a sweep file (cartesian product of params)."""
    params = OmegaConf.load(CONF / "experiment" / f"{name}.yaml").hydra.sweeper.params
    jobs: list[list[str]] = [[]]
    for key, values in params.items():
        jobs = [job + [f"{key}={value.strip()}"] for job in jobs for value in str(values).split(",")]
    return jobs


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_and_each_of_its_jobs_compose(name):
    base = compose_config([f"experiment={name}"])
    validate(base)
    jobs = _sweep_jobs(name)
    assert len(jobs) >= 2, f"{name}: a sweep with fewer than two jobs"
    hashes = set()
    for job in jobs:
        cfg = compose_config([f"experiment={name}", *job])
        validate(cfg)
        for override in job:
            key, value = override.split("=", 1)
            if key == "ablation":
                assert cfg.ablation_name == value
            elif key in ("system", "benchmark"):  # a config group: the option's own name
                assert cfg[key].name == value
            else:
                assert str(OmegaConf.select(cfg, key)) == value
        hashes.add(config_hash(cfg))  # the run folder's identity: config and input files
    assert len(hashes) == len(jobs), f"{name}: two jobs compose to the same run (config hash)"
