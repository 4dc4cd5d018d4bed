"""Hydra launchers: a two-job sweep through submitit_local (the code path Slurm runs), for real.

The jobs run ``run.py`` on a LoCoMo slice with ``system=full_context`` (no embedder needed) and
``llm=openai_compat`` pointed at core/llm/simulated_server.py, a SIMULATED OpenAI-compatible server
this test starts: the launcher, pickling, job folders and result collection are real; the LLM is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.llm.simulated_server import MODEL_ID, LatencyModel, SimulatedServer

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (REPO / "data" / "locomo10.json").is_file(), reason="data/locomo10.json missing"),
]


def test_two_job_sweep_through_submitit_local(tmp_path):
    # Started from its own folder with the default results_dir, as a user starts a sweep: a default
    # that only resolves inside a job (hydra.sweep.dir is resolved before any job) fails here.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "locomo10.json").symlink_to(REPO / "data" / "locomo10.json")
    with SimulatedServer(LatencyModel(fixed_s=0.005, decode_s_per_token=0.0)) as server:
        cmd = [
            sys.executable, str(REPO / "run.py"), "-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10",
            "experiment=locomo", "system=full_context", "benchmark.max_questions=1,2", "logger=none",
            "llm=openai_compat", f"llm.base_url={server.base_url}", f"llm.model={MODEL_ID}", "llm.api_key_env=null",
            f"cache_dir={tmp_path}/cache",
        ]  # fmt: skip
        done = subprocess.run(cmd, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = [json.loads(p.read_text()) for p in tmp_path.glob("results/runs/locomo/full_context/none/*/metrics.json")]
    assert sorted(m["overall"]["n"] for m in metrics) == [1, 2]  # two jobs, two configurations
    assert sorted(m["metadata"]["llm_usage"]["calls"] for m in metrics) == [2, 4]  # answer + judge per question
    job_logs = list(tmp_path.glob("results/hydra/multirun/*/*/.submitit/*/*_log.out"))
    assert len(job_logs) == 2, "each job ran as a submitit job (its own folder and log)"
