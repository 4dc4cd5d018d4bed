"""``python run.py experiment=paper_tables`` end to end at tiny size: the one command for Tables 1-3 on a GPU box.

The sweep is the real one (the experiment file's joblib launcher, one process per job, each benchmark at its
defaults, llm=vllm) with two of its systems, on tiny data placed where the defaults look (data/locomo10.json,
data/HaluMem-Medium.jsonl; the conflict suite is two cases of the household dev suite), against
core/llm/simulated_server.py, a SIMULATED OpenAI-compatible server standing in for vLLM. It checks the wiring (every job
runs and writes its metrics; a second invocation reads its jobs back), never quality: the server's replies are deterministic stand-ins.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.llm.simulated_server import MODEL_ID, LatencyModel, SimulatedServer
from tests.unit.eval.test_experiments_smoke import DEV_SUITE, HALUMEM_TINY, _tiny_locomo

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration]
SYSTEMS = ("full_context", "rag")
BENCHMARKS = ("locomo", "halumem", "conflict")


def _tiny_data(root: Path) -> Path:
    """The benchmarks' default file names under root/data, holding a few turns each; returns the tiny conflict suite."""
    (root / "data").mkdir()
    _tiny_locomo(root / "data" / "locomo10.json")
    shutil.copy(HALUMEM_TINY, root / "data" / "HaluMem-Medium.jsonl")
    suite = json.loads(DEV_SUITE.read_text(encoding="utf-8"))
    suite["cases"] = [next(c for c in suite["cases"] if c["conflict"]), next(c for c in suite["cases"] if not c["conflict"])]
    path = root / "data" / "household_two_cases.json"
    path.write_text(json.dumps(suite), encoding="utf-8")
    return path


def _sweep(root: Path, base_url: str, suite: Path, systems: tuple[str, ...] = SYSTEMS) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, str(REPO / "run.py"), "experiment=paper_tables", f"system={','.join(systems)}",
        f"llm.base_url={base_url}", "llm.health_timeout_s=30", "logger=none", f"+conflict.suite={suite}",
        f"cache_dir={root}/cache",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def test_paper_tables_sweep_runs_every_job_and_resumes(tmp_path):
    suite = _tiny_data(tmp_path)
    with SimulatedServer(LatencyModel(fixed_s=0.002, decode_s_per_token=0.0)) as server:
        first = _sweep(tmp_path, server.base_url, suite)
        assert first.returncode == 0, first.stderr[-3000:]
        served = server.stats.served
        metrics = {(m["metadata"]["benchmark"], m["metadata"]["system"]): m
                   for m in (json.loads(p.read_text()) for p in tmp_path.glob("results/runs/*/*/none/*/metrics.json"))}  # fmt: skip
        assert sorted(metrics) == sorted((b, s) for b in BENCHMARKS for s in SYSTEMS), "one run per job"
        for system in SYSTEMS:
            assert metrics[("locomo", system)]["overall"]["n"] == 4
            assert metrics[("conflict", system)]["n_cases"] == 2
            assert metrics[("halumem", system)]["counts"]["questions"] == 9
            assert metrics[("locomo", system)]["metadata"]["llm_model_id"] == MODEL_ID  # read from /v1/models
        jobs = list(tmp_path.glob("results/hydra/multirun/*/*/*/.hydra/overrides.yaml"))
        assert len(jobs) == len(BENCHMARKS) * len(SYSTEMS)
        again = _sweep(tmp_path, server.base_url, suite, SYSTEMS[:1])  # the same command reads finished jobs back
        assert again.returncode == 0, again.stderr[-3000:]
        assert server.stats.served == served, "a finished job called the LLM again"
    assert len(list(tmp_path.glob("results/runs/*/*/none/*/metrics.json"))) == len(metrics)
