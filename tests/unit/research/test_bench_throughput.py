"""research/bench_throughput.py on the SIMULATED latency server: the judge stage scales with run.workers."""

from __future__ import annotations

import json

from tests.script_loader import load_script


def test_latency_model_sweep_writes_json_and_png(tmp_path):
    bench = load_script("bench_throughput", package="research")
    entry = bench.main(["--backend", "latency-model", "--workers", "1,4", "--calls-per-worker", "4", "--min-calls", "8",
                        "--fixed-s", "0.05", "--per-token-s", "0.0", "--overhead-calls", "30", "--out", str(tmp_path)])  # fmt: skip
    table = json.loads((tmp_path / "throughput.json").read_text())
    assert entry["backend"] in table and table[entry["backend"]]["simulation"] is True
    runs = entry["runs"]
    assert [r["workers"] for r in runs] == [1, 4] and all(r["calls"] == r["items"] and r["judge_failures"] == 0 for r in runs)
    assert runs[0]["wall_s"] >= 8 * 0.05  # serial: at least the simulated service time
    assert runs[1]["speedup"] > 2.5  # 4 threads on a server that serves 64 at once (loose: a loaded 2-core machine)
    assert entry["zero_latency_ms_per_call"]["judge_call_ms"] > 0
    assert (tmp_path / "throughput.png").stat().st_size > 1000
