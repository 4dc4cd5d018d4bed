"""Nothing heavy on the path of a finished run's rerun: run.py imports no pandas, torch, sentence-transformers,
plotting or baseline library, and a finished run's table written by the same code is printed from table.md
(building it would import pandas). Measured end to end by research/bench_warm_start.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("pandas", "torch", "sentence_transformers", "transformers", "matplotlib", "mem0", "graphiti_core", "letta_client", "agentic_memory",
         "scipy", "sklearn", "wandb")  # fmt: skip


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_run_py_imports_nothing_heavy():
    done = _python(f"import sys, run; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_finished_run_prints_its_table_from_disk_without_pandas(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text(json.dumps({"metadata": {"benchmark_target": "eval.benchmarks.locomo.LoCoMoBenchmark"}}))
    (run_dir / "table.md").write_text("| the table as the run wrote it |\n")
    code = (f"import sys; from pathlib import Path; from omegaconf import OmegaConf; from eval.runner import _finish\n"
            f"metrics = {{'metadata': {{'benchmark_target': 'eval.benchmarks.locomo.LoCoMoBenchmark'}}}}\n"
            f"_finish(OmegaConf.create({{}}), Path({str(run_dir)!r}), metrics, log_external=False, table_on_disk=%s)\n"
            f"print('pandas' in sys.modules)")  # fmt: skip
    done = _python(code % "True")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "| the table as the run wrote it |"
    assert lines[-3:] == [f"view it: python -m scripts.view {run_dir}", str(run_dir / "metrics.json"), "False"]
    # other code (or no table on disk): the table is built again, which is where pandas comes in
    done = _python(code % "False")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "True" and "the table as the run wrote it" not in done.stdout


def test_a_finished_run_skips_the_input_check_and_every_other_run_makes_it(tmp_path, monkeypatch):
    """Parsing the dataset again (about a third of a warm rerun) is skipped only where it was done before: a
    clean finished folder, named for the content hashes of the very inputs."""
    import eval.runner as runner
    from omegaconf import OmegaConf

    checked: list[bool] = []
    monkeypatch.setattr(runner, "validate", lambda cfg: None)
    monkeypatch.setattr(runner, "input_hashes", lambda cfg: {})
    monkeypatch.setattr(runner, "run_dir_for", lambda cfg, inputs: tmp_path / "run")
    monkeypatch.setattr(runner, "check_inputs", lambda cfg: checked.append(True))
    monkeypatch.setattr(runner, "_run_locked", lambda cfg, overrides, run_dir, inputs, built=None: {})
    (tmp_path / "run").mkdir()

    def checks(overwrite: bool = False) -> bool:
        checked.clear()
        runner.run(OmegaConf.create({"overwrite": overwrite}))
        return bool(checked)

    assert checks()  # nothing finished yet
    (tmp_path / "run" / "metrics.json").write_text(json.dumps({"failures": {"rows": 2}}))
    assert checks()  # failed rows: the rerun does work
    (tmp_path / "run" / "metrics.json").write_text(json.dumps({"failures": {"rows": 0}}))
    assert not checks() and checks(overwrite=True)


def test_the_run_uses_the_benchmark_and_embedder_the_input_check_built(tmp_path, monkeypatch):
    """Each is built once at start: the objects check_inputs built (and checked) are the run's, not rebuilt."""
    import eval.runner as runner
    from omegaconf import OmegaConf

    built = (object(), object())
    received: list[object] = []
    monkeypatch.setattr(runner, "validate", lambda cfg: None)
    monkeypatch.setattr(runner, "input_hashes", lambda cfg: {})
    monkeypatch.setattr(runner, "run_dir_for", lambda cfg, inputs: tmp_path / "run")
    monkeypatch.setattr(runner, "check_inputs", lambda cfg: built)
    monkeypatch.setattr(runner, "_run_locked", lambda cfg, overrides, run_dir, inputs, built=None: received.append(built) or {})
    (tmp_path / "run").mkdir()
    runner.run(OmegaConf.create({"overwrite": False}))
    assert received == [built]
