"""``python -m scripts.compare_backends --run`` end to end: two backends on one slice, run, paired and tabulated.

The two backends are two model names on core/llm/simulated_server.py, a SIMULATED OpenAI-compatible server
(deterministic replies): this checks the wiring (cells found or run, the comparison and the cost lines written, missing cells
named), never quality. The live comparison of the two local models is results/tables/backends.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.llm.simulated_server import LatencyModel, SimulatedServer
from tests.unit.eval.test_experiments_smoke import _tiny_locomo

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration]


def _compare(tmp_path: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    locomo = _tiny_locomo(tmp_path / "locomo_tiny.json")
    backend = f"llm=openai_compat llm.base_url={base_url} llm.api_key_env=null"
    cmd = [
        sys.executable, "-m", "scripts.compare_backends", "--results-dir", str(tmp_path / "results"),
        "--out", str(tmp_path / "backends.md"),
        "--backend", f"small={backend} llm.model=sim-small", "--backend", f"large={backend} llm.model=sim-large",
        "--row", f"full_context tiny=experiment=locomo system=full_context benchmark.path={locomo} benchmark.conversations=null "
                 f"benchmark.max_sessions=2 logger=none cache_dir={tmp_path}/cache", *extra,
    ]  # fmt: skip
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_missing_cells_are_named_then_run_and_paired(tmp_path):
    with SimulatedServer(LatencyModel(fixed_s=0.002, decode_s_per_token=0.0)) as server:
        dry = _compare(tmp_path, server.base_url)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert server.stats.served == 0 and "No backend measured yet." in dry.stdout
        assert dry.stdout.count("`python run.py experiment=locomo system=full_context") == 3  # the row, then its two cells
        done = _compare(tmp_path, server.base_url, "--run")
        assert done.returncode == 0, done.stderr[-3000:]
        assert server.stats.served > 0
    table = (tmp_path / "backends.md").read_text()
    assert "| small |" in table and "| large |" in table  # a cost line per backend
    assert "- base" in table and "+0.0 [+0.0, +0.0]" in table  # paired difference of large against small: same fixed replies
    assert table.rstrip().endswith("None.") and "**2 of 2 cells measured**" in table  # no cell left unmeasured
