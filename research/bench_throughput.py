"""Throughput of one benchmark stage (the LoCoMo judge) at run.workers = N, and the harness's own overhead.

The stage is the harness's real code path: ``eval.workers.Stage`` with N threads calls
``eval.judge.LLMJudge.judge`` through the OpenAI-compatible client (no response cache) on the
predictions of a published LoCoMo run, exactly as ``LoCoMoBenchmark._score`` does. Two backends:

* ``--backend latency-model``: core/llm/simulated_server.py, a SIMULATION of a GPU server (fixed time
  per request + time per token, at most ``--max-in-flight`` requests at once). Its service time
  is known, so the harness's overhead per call is measured: wall time per call at N=1 minus the
  simulated service time. Speedup at N is requests/s at N over requests/s at N=1.
* ``--backend local``: the in-process llama.cpp server (``--model``, ``--parallel`` slots); on a
  2-core CPU the slots share the cores, so expect little or no speedup.

Writes ``<out>/throughput.json`` (one entry per backend) and ``<out>/throughput.png``.

Usage: ``python -m research.bench_throughput --backend latency-model`` or
``python -m research.bench_throughput --backend local --model qwen2.5-coder-0.5b-instruct --workers 1,2,4 --calls 4``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any


from core.llm import LocalLLM, OpenAICompatClient
from eval.judge import LLMJudge, build_judge
from eval.rows import read_rows
from eval.workers import Stage
from core.llm.simulated_server import LatencyModel, SimulatedServer

DEFAULT_PREDICTIONS = "results/published/runs/locomo/rag/none/26cb1a02f252/predictions.jsonl"


def load_items(path: str | Path) -> list[dict[str, Any]]:
    """(question, gold, prediction) rows of a LoCoMo run's predictions.jsonl."""
    rows = read_rows(path)  # a damaged line is skipped and named (file, line), as every row reader does
    if not rows:
        raise ValueError(f"{path}: no predictions (pass --predictions <run folder>/predictions.jsonl)")
    return [{"question": r["question"], "gold": r["gold"], "prediction": r["prediction"]} for r in rows]


def conf_judge(client: OpenAICompatClient, overrides: list[str] | None = None) -> LLMJudge:
    """The judge a run gets from conf/judge (prompt, max_tokens, attempts), asking ``client``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[1] / "conf"), version_base="1.3"):
        return build_judge(compose("config", overrides=overrides or []).judge, client)


def judge_stage(client: OpenAICompatClient, items: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    """Judge ``items`` on ``workers`` threads; wall time, requests/s and the client's metered calls."""
    judge = conf_judge(client)
    before = client.usage
    started = time.perf_counter()
    with Stage(None, "judge", len(items), workers) as stage:
        verdicts = stage.map(lambda it: judge.judge(it["question"], it["gold"], it["prediction"]), items)
    wall = time.perf_counter() - started
    calls = client.usage.calls - before.calls
    return {
        "workers": workers, "items": len(items), "calls": calls, "wall_s": round(wall, 4),
        "requests_per_s": round(calls / wall, 3), "judge_failures": sum(v["label"] is None for v in verdicts),
    }  # fmt: skip


def sweep(
    client: OpenAICompatClient, items: list[dict[str, Any]], workers: list[int], calls_per_worker: int, min_calls: int, repeats: int = 1
) -> list[dict[str, Any]]:
    """``judge_stage`` per N with ``max(min_calls, calls_per_worker * N)`` items (cycled from ``items``);
    with ``repeats`` > 1 the repeat with the median wall time is kept (a shared machine's hiccups)."""
    client.model_id  # noqa: B018  (resolves the model and opens the HTTP client before any thread starts)
    out = []
    for n in workers:
        count = max(min_calls, calls_per_worker * n)
        batch = [items[i % len(items)] for i in range(count)]
        tries = sorted((judge_stage(client, batch, n) for _ in range(repeats)), key=lambda r: r["wall_s"])
        row = {**tries[len(tries) // 2], "repeats": repeats, "wall_s_all": [r["wall_s"] for r in tries]}
        print(json.dumps(row), flush=True)
        out.append(row)
    base = out[0]["requests_per_s"] / out[0]["workers"]
    for row in out:
        row["speedup"] = round(row["requests_per_s"] / base, 3) if base else None
        row["efficiency"] = round(row["speedup"] / row["workers"], 3) if base else None
    return out


def zero_latency_overhead(items: list[dict[str, Any]], calls: int = 200) -> dict[str, float]:
    """Milliseconds per call against a server that answers at once (N=1): the judge path through the
    harness's client, and a bare httpx POST of the same request; their difference is the harness's own cost."""
    import httpx

    with SimulatedServer(LatencyModel(0.0, 0.0, 0.0, 64)) as server:
        client = OpenAICompatClient(base_url=server.base_url, model=None, cache_path=None, max_retries=1)
        bare = httpx.Client(trust_env=False)
        judge = conf_judge(client)
        payload = {"model": client.model_id, "messages": judge.messages(**items[0]), "max_tokens": judge.max_tokens}

        def per_call_ms(fn: Any) -> float:
            for i in range(5):
                fn(i)  # warm-up: connection, imports
            started = time.perf_counter()
            for i in range(calls):
                fn(i)
            return (time.perf_counter() - started) / calls * 1000

        try:
            raw = per_call_ms(lambda i: bare.post(server.base_url + "/v1/chat/completions", json=payload).json())
            harness = per_call_ms(lambda i: judge.judge(**items[i % len(items)]))
        finally:
            bare.close()
            client.close()
    return {"judge_call_ms": round(harness, 3), "bare_http_ms": round(raw, 3), "harness_ms": round(harness - raw, 3)}


def run_latency_model(args: argparse.Namespace, items: list[dict[str, Any]], workers: list[int]) -> dict[str, Any]:
    model = LatencyModel(args.fixed_s, 0.0, args.per_token_s, args.max_in_flight)
    with SimulatedServer(model) as server:
        client = OpenAICompatClient(base_url=server.base_url, model=None, cache_path=None, max_retries=1)
        try:
            rows = sweep(client, items, workers, args.calls_per_worker, args.min_calls, args.repeats)
        finally:
            client.close()
        service_mean = server.stats.busy_s / max(server.stats.served, 1)
    first = rows[0]
    wall_minus_service_ms = (first["wall_s"] / first["calls"] - service_mean) * 1000 * first["workers"]
    zero = zero_latency_overhead(items, args.overhead_calls)
    return {
        "backend": "latency-model (SIMULATION, core/llm/simulated_server.py)",
        "simulation": True,
        "latency_model": model.__dict__,
        "simulated_service_s_mean": round(service_mean, 5),
        # wall time per call at N=1 minus the simulated service time: harness + the simulated server's
        # HTTP handling + sleep overshoot and scheduling on a loaded machine (an upper bound)
        "wall_minus_service_ms_per_call_at_1": round(wall_minus_service_ms, 3),
        # against a zero-latency server: the judge path vs a bare httpx POST of the same request
        "zero_latency_ms_per_call": zero,
        "harness_overhead_ms_per_call": zero["harness_ms"],
        "runs": rows,
        "targets": {"speedup_at_least_0.8N_up_to_16": all(r["efficiency"] >= 0.8 for r in rows if r["workers"] <= 16),
                    "harness_overhead_under_5ms": zero["harness_ms"] < 5.0,
                    "wall_minus_service_under_5ms": wall_minus_service_ms < 5.0},
    }  # fmt: skip


def run_local(args: argparse.Namespace, items: list[dict[str, Any]], workers: list[int]) -> dict[str, Any]:
    client = LocalLLM(model=args.model, parallel=args.parallel or max(workers), cache_path=None, threads=args.threads)
    try:
        started = time.perf_counter()
        client.model_id  # noqa: B018  (starts the server; not part of the measured stage)
        startup = time.perf_counter() - started
        rows = sweep(client, items, workers, args.calls_per_worker, args.min_calls)
    finally:
        client.close()
    return {
        "backend": f"local:{args.model}", "simulation": False, "parallel_slots": args.parallel or max(workers),
        "server_start_s": round(startup, 2), "runs": rows,
    }  # fmt: skip


def plot(table: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rate, ax_speed) = plt.subplots(1, 2, figsize=(10, 4))
    top = 1
    for name, entry in table.items():
        runs = entry["runs"]
        n = [r["workers"] for r in runs]
        top = max(top, *n)
        label = ("SIMULATED " if entry.get("simulation") else "") + name.split(" (")[0]
        ax_rate.plot(n, [r["requests_per_s"] for r in runs], marker="o", label=label)
        ax_speed.plot(n, [r["speedup"] for r in runs], marker="o", label=label)
    ax_speed.plot([1, top], [1, top], "k--", lw=0.8, label="ideal (N)")
    ax_speed.plot([1, top], [0.8, 0.8 * top], "k:", lw=0.8, label="0.8 N")
    ax_speed.set_yscale("log", base=2)
    for ax, title in ((ax_rate, "requests/s"), (ax_speed, "speedup over N=1")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("run.workers (N)")
        ax.set_title(f"LoCoMo judge stage: {title}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["latency-model", "local"], required=True)
    parser.add_argument("--workers", default="1,2,4,8,16,32", help="comma-separated N")
    parser.add_argument("--calls-per-worker", type=int, default=8, help="calls at N = max(min-calls, this x N)")
    parser.add_argument("--min-calls", type=int, default=16)
    parser.add_argument("--predictions", default=DEFAULT_PREDICTIONS)
    parser.add_argument("--fixed-s", type=float, default=0.05, help="latency model: seconds per request")
    parser.add_argument("--per-token-s", type=float, default=0.005, help="latency model: seconds per generated token")
    parser.add_argument("--max-in-flight", type=int, default=64, help="latency model: requests served at once")
    parser.add_argument("--repeats", type=int, default=3, help="latency model: repeats per N (median wall time kept)")
    parser.add_argument("--overhead-calls", type=int, default=200, help="latency model: calls timed against a zero-latency server")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="local: model name or .gguf")
    parser.add_argument("--parallel", type=int, default=None, help="local: llama.cpp slots (default: the largest N)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--note", default="")
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args(argv)
    workers = [int(n) for n in args.workers.split(",")]
    items = load_items(args.predictions)
    entry = (run_latency_model if args.backend == "latency-model" else run_local)(args, items, workers)
    entry.update({"stage": "LoCoMo judge (eval.judge.LLMJudge on eval.workers.Stage)", "predictions": args.predictions,
                  "cpus": os.cpu_count(), "python": platform.python_version(), "note": args.note,
                  "command": " ".join(["python", "research/bench_throughput.py", *(argv if argv is not None else sys.argv[1:])]),
                  "when": time.strftime("%Y-%m-%dT%H:%M:%S")})  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "throughput.json"
    table = json.loads(path.read_text()) if path.exists() else {}
    table[entry["backend"]] = entry
    path.write_text(json.dumps(table, indent=2) + "\n")
    plot(table, out / "throughput.png")
    print(json.dumps({k: v for k, v in entry.items() if k != "runs"}, indent=2))
    print(path)
    return entry


if __name__ == "__main__":
    main()
