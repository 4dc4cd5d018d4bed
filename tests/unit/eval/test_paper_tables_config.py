"""experiment=paper_tables is the whole of Tables 1-3: every system on every benchmark, each at its full size.

Composing costs seconds; running it is tests/integration/test_paper_tables_sweep.py (tiny data, simulated server)."""

from __future__ import annotations

from omegaconf import OmegaConf

from tests.hydra_config import CONF, compose_config, options

# the keys that cut a benchmark to a slice; the paper's tables leave every one unset
SLICE_KEYS = {
    "locomo": ("conversations", "max_sessions", "max_questions"),
    "halumem": ("limit_users", "limit_sessions"),
    "conflict": ("limit_cases", "cases_per_group"),
}


def _sweep() -> dict[str, list[str]]:
    params = OmegaConf.load(CONF / "experiment" / "paper_tables.yaml").hydra.sweeper.params
    return {key: [v.strip() for v in str(values).split(",")] for key, values in params.items()}


def test_the_sweep_covers_every_system_on_the_three_benchmarks():
    sweep = _sweep()
    assert sorted(sweep["system"]) == options("system")
    assert sorted(sweep["benchmark"]) == sorted(SLICE_KEYS) == options("benchmark")


def test_each_benchmark_runs_whole_on_the_vllm_backend():
    for benchmark, keys in SLICE_KEYS.items():
        cfg = compose_config(["experiment=paper_tables", f"benchmark={benchmark}", "system=rag"])
        assert cfg.llm._target_ == "core.llm.OpenAICompatClient" and cfg.run.workers > 1
        assert cfg.hydra.launcher._target_.endswith("JoblibLauncher")
        assert all(cfg.benchmark[key] is None for key in keys), f"{benchmark}: a slice key is set"
    locomo = compose_config(["experiment=paper_tables", "benchmark=locomo", "system=rag"]).benchmark
    assert not locomo.evidence_in_ingested_only and list(locomo.exclude_categories) == [5]


def test_another_launcher_replaces_the_joblib_one_whole():
    """The job count lives in conf/hydra/launcher/joblib_jobs3.yaml, not in the experiment: set there, it would be a
    key the basic and submitit launchers do not have, and `hydra/launcher=basic` would fail to compose."""
    assert compose_config(["experiment=paper_tables"]).hydra.launcher.n_jobs == 3
    for launcher, target in (("basic", "BasicLauncher"), ("submitit_local", "LocalLauncher"), ("submitit_slurm", "SlurmLauncher")):
        cfg = compose_config(["experiment=paper_tables", f"hydra/launcher={launcher}"])
        assert cfg.hydra.launcher._target_.endswith(target) and "n_jobs" not in cfg.hydra.launcher
