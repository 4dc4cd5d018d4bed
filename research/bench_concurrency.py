"""Conversations written at once: speedup at run.workers = 1 / 4 / 16 for all seven systems, against the
SIMULATED backend (core/llm/simulated_server.py). It measures the HARNESS (how its adapters scale with requests
in flight, its own CPU per LLM call), never the quality of anything: the replies are cut from the prompts.

A unit is what one LoCoMo conversation is to a run: reset a namespace, add its sessions, then for each question
search and answer with the shared answerer (conf/answerer) -- on the harness's own ``eval.workers.Stage`` and
``SystemGuard``, as ``LoCoMoBenchmark`` drives them. LoCoMo has ten conversations and conv-49 is kept for
evaluation, so the units are the nine development conversations, each cut to its first ``--turns`` turns and
``--questions`` questions, repeated (namespace ``bench-u<i>-<conversation>-r<repeat>``) until there are
``--units`` of them: enough for 16 in flight. Every system gets the same units at every N.

The simulated server runs in a process of its own, so the harness's CPU seconds (this process and the servers it
starts: FalkorDB, Letta; not the simulated server) divided by the LLM calls served is the harness's CPU per call.
Speedup at N is wall(N=1) / wall(N); the target is >= 0.8 N at N=16. Every N drives its units from a pool thread
(N=1 too): on this machine the main thread pays far more CPU per embedding (``thread_probe``, recorded with the
table), which would otherwise be counted as a gain of concurrency.

Usage: ``nice -n 15 python -m research.bench_concurrency`` (all seven systems) or ``--systems mem0,amem --workers 1,4``.
Writes ``results/bench/concurrency.json`` and ``concurrency.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from core.api import AddReport, Turn
from core.llm import OpenAICompatClient, free_port
from core.llm.simulated_server import LABEL, MODEL_ID, LatencyModel
from eval.benchmarks.locomo.data import load_locomo
from eval.workers import Stage, SystemGuard

SYSTEMS = ("mosaic", "rag", "full_context", "mem0", "amem", "zep", "memgpt")
EVALUATION_CONVERSATIONS = frozenset({"conv-49"})  # measured once, at the end: never a development unit
REPO = Path(__file__).resolve().parents[1]
TARGET_EFFICIENCY = 0.8  # the target: speedup >= 0.8 N at the largest N measured


@dataclass(frozen=True)
class Unit:
    """One conversation's worth of work: sessions to add, then questions to answer."""

    namespace: str
    sessions: tuple[tuple[str, tuple[Turn, ...]], ...]  # (session time, turns)
    questions: tuple[str, ...]
    question_time: str


def development_units(path: str | Path, n_units: int, turns: int, questions: int) -> list[Unit]:
    """``n_units`` units cut from LoCoMo's development conversations (never conv-49), repeated as needed."""
    conversations = [c for c in load_locomo(path) if c.sample_id not in EVALUATION_CONVERSATIONS]
    units = []
    for i in range(n_units):
        conversation = conversations[i % len(conversations)]
        sessions, left = [], turns
        for session in conversation.sessions:
            if left <= 0:
                break
            taken = session.turns[:left]
            sessions.append((session.time_iso, tuple(taken)))
            left -= len(taken)
        units.append(Unit(
            namespace=f"bench-u{i:02d}-{conversation.sample_id}-r{i // len(conversations)}",
            sessions=tuple(sessions), questions=tuple(q.question for q in conversation.questions[:questions]),
            question_time=sessions[-1][0],
        ))  # fmt: skip
    return units


def outcome(unit: Unit, reports: list[AddReport], retrieved: list[list[Any]], answers: list[str]) -> dict[str, Any]:
    """What one unit produced, without ids a library draws at random (Mem0's uuid4): comparable across runs."""
    return {
        "namespace": unit.namespace,
        "stored": sorted(item.text for r in reports for item in r.stored),
        "updated": sum(len(r.updated) for r in reports),
        "rejected": sum(len(r.rejected) for r in reports),
        "failures": sum(r.failures for r in reports),
        "calls": sum(r.usage.calls for r in reports),
        "prompt_tokens": sum(r.usage.prompt_tokens for r in reports),
        "retrieved": [[hit.text for hit in hits] for hits in retrieved],
        "answers": answers,
    }


def drive(system: Any, units: list[Unit], workers: int, answerer: Any = None, top_k: int = 10) -> list[dict[str, Any]]:
    """Every unit through ``system`` with ``workers`` units at once (as LoCoMoBenchmark does); outcomes in unit order."""
    guard = SystemGuard(system)

    def one(unit: Unit) -> dict[str, Any]:
        with guard.writing():
            system.reset(unit.namespace)
            reports = [system.add(unit.namespace, list(turns), when) for when, turns in unit.sessions]
        retrieved, answers = [], []
        for question in unit.questions:
            with guard.searching(unit.namespace):
                hits = system.search(unit.namespace, question, top_k)
            retrieved.append(hits)
            if answerer is not None:
                answers.append(answerer.answer(question, hits, unit.question_time)["text"])
        return outcome(unit, reports, retrieved, answers)

    with Stage(None, "units", len(units), guard.namespace_workers(workers)) as stage:
        return stage.map(one, units)


def drive_off_main_thread(system: Any, units: list[Unit], workers: int, answerer: Any = None) -> list[dict[str, Any]]:
    """``drive`` from a pool thread, so that N=1 runs its units on a thread like every other N (see ``thread_probe``)."""
    with ThreadPoolExecutor(1, thread_name_prefix="bench-driver") as pool:
        return pool.submit(drive, system, units, workers, answerer).result()


def thread_probe(embedder: Any, calls: int = 20) -> dict[str, Any]:
    """CPU and wall seconds of ``calls`` single-text embeddings from the main thread and from a pool thread.

    On this shared 2-core machine torch's 2-thread parallel regions cost far more from the main thread (a
    run at run.workers=1 embeds there); measured here so the N=1 baseline below (always on a pool thread) can
    be read against what a run at run.workers=1 pays."""
    def work() -> None:
        for i in range(calls):
            embedder.encode([f"probe sentence {i}: the harness embeds one short text"])
            time.sleep(0.02)

    out = {}
    for where, run in (("main_thread", work), ("pool_thread", lambda: ThreadPoolExecutor(1).submit(work).result())):
        cpu, wall = harness_cpu_s(-1), time.perf_counter()
        run()
        out[where] = {"cpu_s": round(harness_cpu_s(-1) - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2)}
    return {"calls": calls, **out}


# -- the simulated server, in a process of its own --------------------------------------------------
class ServerProcess:
    """``python -m core.llm.simulated_server`` on a free port; ``stats()`` reads its counters."""

    def __init__(self, model: LatencyModel) -> None:
        self.port = free_port()
        args = [f"--{k.replace('_', '-')}={v}" for k, v in model.__dict__.items()]
        self.proc = subprocess.Popen([sys.executable, "-m", "core.llm.simulated_server", f"--port={self.port}", *args],
                                     cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"simulated server on port {self.port} did not start in 60 s")

    def stats(self, reset_peak: bool = False) -> dict[str, Any]:
        return httpx.get(self.url + ("/stats/reset_peak" if reset_peak else "/stats"), timeout=10, trust_env=False).json()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def harness_cpu_s(exclude_pid: int) -> float:
    """CPU seconds of this process and every live descendant (FalkorDB, Letta) but the simulated server."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        if child.pid == exclude_pid:
            continue
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def harness_rss_mb(exclude_pid: int) -> float:
    me = psutil.Process()
    rss = me.memory_info().rss
    for child in me.children(recursive=True):
        if child.pid != exclude_pid:
            try:
                rss += child.memory_info().rss
            except psutil.NoSuchProcess:
                pass
    return round(rss / 2**20, 1)


def compose(overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


def build(name: str, llm: Any, embedder: Any, workdir: Path) -> Any:
    """The system as ``system=<name>`` builds it for a run (conf/system/<name>.yaml)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = compose([f"system={name}"])
    system_cfg = OmegaConf.to_container(cfg.system, resolve=True)
    return instantiate(system_cfg, llm=llm, embedder=embedder, workdir=str(workdir), _convert_="all")


def measure(name: str, units: list[Unit], workers: int, server: ServerProcess, embedder: Any, answerer_cfg: Any) -> dict[str, Any]:
    """One system at one N: a fresh system in a fresh folder, warmed on a unit of its own, then timed."""
    from hydra.utils import instantiate

    llm = OpenAICompatClient(base_url=server.url, model=MODEL_ID, cache_path=None, max_retries=1, timeout_s=600)
    answerer = instantiate(answerer_cfg, llm=llm)
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as workdir:
        system = build(name, llm, embedder, Path(workdir))
        try:
            warm = [Unit(f"warm-{u.namespace}", u.sessions, u.questions, u.question_time) for u in units[:2]]
            drive_off_main_thread(system, warm, 1, answerer)  # servers started, models loaded, lazy imports done: not part of the timed work
            before, cpu_before, load_before = server.stats(reset_peak=True), harness_cpu_s(server.proc.pid), os.getloadavg()
            started = time.perf_counter()
            outcomes = drive_off_main_thread(system, units, workers, answerer)
            wall = time.perf_counter() - started
            cpu = harness_cpu_s(server.proc.pid) - cpu_before
            after, rss = server.stats(), harness_rss_mb(server.proc.pid)
        finally:
            close = getattr(system, "close", None)
            if callable(close):
                close()
            llm.close()
    calls = after["chat"] - before["chat"]
    return {
        "system": name, "workers": workers, "units": len(units), "wall_s": round(wall, 2), "llm_calls": calls,
        "simulated_busy_s": round(after["busy_s"] - before["busy_s"], 2), "peak_in_flight": after["peak_in_flight"],
        "harness_cpu_s": round(cpu, 2), "harness_cpu_ms_per_call": round(1000 * cpu / calls, 1) if calls else None,
        "harness_rss_mb": rss, "failures": sum(o["failures"] for o in outcomes),
        "load_average_before": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "outcomes_digest": _digest(outcomes),
    }  # fmt: skip


def _digest(outcomes: list[dict[str, Any]]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(outcomes, sort_keys=True).encode()).hexdigest()[:16]


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system: wall time, speedup and efficiency at each N against its own N=1."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r["system"] for r in rows):
        mine = {r["workers"]: r for r in rows if r["system"] == name}
        base = mine.get(1)
        per_n = {}
        for n, row in sorted(mine.items()):
            speedup = base["wall_s"] / row["wall_s"] if base and row["wall_s"] else None
            per_n[str(n)] = {"wall_s": row["wall_s"], "speedup": round(speedup, 2) if speedup else None,
                             "efficiency": round(speedup / n, 2) if speedup else None}
        out[name] = {"by_workers": per_n, "llm_calls": base["llm_calls"] if base else None,
                     "harness_cpu_ms_per_call": base["harness_cpu_ms_per_call"] if base else None,
                     "same_outcomes_at_every_n": len({r["outcomes_digest"] for r in mine.values()}) == 1,
                     "cpu_bound": cpu_bound(base, mine[max(mine)]) if base and max(mine) > 1 else None}
    return out


def cpu_bound(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Whether the harness's own CPU can explain a speedup short of the target at the largest N: the CPUs it needs
    to do its work (harness CPU seconds at that N) within the target's wall time (wall at N=1 / (0.8 N)), against
    the CPUs it obtained there (its CPU seconds / its wall seconds). Needing more than it obtained, on a machine
    whose load average says others held the rest, is a CPU limit of this machine, not of the adapter."""
    n = top["workers"]
    target_wall = base["wall_s"] / (TARGET_EFFICIENCY * n)
    return {"workers": n, "harness_cpu_s": top["harness_cpu_s"], "target_wall_s": round(target_wall, 2),
            "cpus_needed": round(top["harness_cpu_s"] / target_wall, 2),
            "cpus_obtained": round(top["harness_cpu_s"] / top["wall_s"], 2) if top["wall_s"] else None,
            "load_average": top["load_average_before"][0], "peak_in_flight": top["peak_in_flight"]}


def verdict(bound: dict[str, Any], cpus: int) -> str:
    """CPU-bound when the harness needs more CPUs than the machine has, or when it needs more than it obtained while
    other jobs already kept every CPU busy (load average before the run >= CPUs: no idle CPU was left to take).
    (Needing more than it obtained is true of any shortfall by itself: the load is what makes it the CPU's doing.)"""
    if bound["cpus_needed"] > cpus:
        return f" CPU-bound: more than the machine's {cpus} CPUs."
    if bound["load_average"] >= cpus:
        return " CPU-bound on this shared machine: no idle CPU was left to reach the CPUs it needs."
    return " Not explained by CPU alone."


def cpu_notes(table: dict[str, Any]) -> list[str]:
    """One line per system short of the target at the largest N, with the arithmetic of ``cpu_bound``."""
    notes = []
    for name, entry in table["summary"].items():
        bound = entry.get("cpu_bound")
        if not bound or (entry["by_workers"][str(bound["workers"])]["efficiency"] or 0) >= TARGET_EFFICIENCY:
            continue
        wall1, walln = entry["by_workers"]["1"]["wall_s"], entry["by_workers"][str(bound["workers"])]["wall_s"]
        notes.append(
            f"{name}: short of {TARGET_EFFICIENCY} N at N={bound['workers']}. Target wall {wall1} s / ({TARGET_EFFICIENCY} x "
            f"{bound['workers']}) = {bound['target_wall_s']} s; its harness CPU there was {bound['harness_cpu_s']} s, so it needs "
            f"{bound['harness_cpu_s']} / {bound['target_wall_s']} = {bound['cpus_needed']} CPUs throughout; it obtained "
            f"{bound['harness_cpu_s']} / {walln} = {bound['cpus_obtained']} CPUs ({table['cpus']} CPUs, load average "
            f"{bound['load_average']} before, job at nice {table.get('niceness', '?')}; peak in flight {bound['peak_in_flight']})."
            + verdict(bound, table["cpus"]))  # fmt: skip
    return notes


def markdown(table: dict[str, Any]) -> str:
    workers = table["workers"]
    lines = [
        f"# Conversations written at once: speedup by run.workers -- {LABEL}",
        "",
        "HARNESS ONLY: every reply comes from the simulated backend (no model), so these numbers say how the harness "
        "scales with requests in flight and what it costs per call, never how good any system is.",
        "",
        f"Command: `{table['command']}` ({table['when']}, {table['cpus']} CPUs, load average before/after in the JSON).",
        f"Latency model: {table['latency_model']}. Units: {table['units']} ({table['unit_note']}).",
        "",
        "| system | LLM calls | " + " | ".join(f"wall s (N={n})" for n in workers) + " | "
        + " | ".join(f"speedup N={n}" for n in workers if n > 1) + " | harness CPU ms/call (N=1) | same outcomes at every N |",
        "|---|---|" + "---|" * len(workers) + "---|" * (len(workers) - 1) + "---|---|",
    ]
    for name, entry in table["summary"].items():
        by = entry["by_workers"]
        walls = " | ".join(str(by.get(str(n), {}).get("wall_s", "")) for n in workers)
        speeds = " | ".join(f"{by[str(n)]['speedup']} ({by[str(n)]['efficiency']} N)" if str(n) in by and by[str(n)]["speedup"] else ""
                            for n in workers if n > 1)  # fmt: skip
        lines.append(f"| {name} | {entry['llm_calls']} | {walls} | {speeds} | {entry['harness_cpu_ms_per_call']} | {entry['same_outcomes_at_every_n']} |")
    probe = table.get("thread_probe") or {}
    if probe:
        lines += ["", f"Thread probe ({probe['calls']} one-text embeddings, CPU s / wall s): main thread "
                      f"{probe['main_thread']['cpu_s']} / {probe['main_thread']['wall_s']}, pool thread "
                      f"{probe['pool_thread']['cpu_s']} / {probe['pool_thread']['wall_s']}. Every N above runs its units on pool "
                      "threads; a run at run.workers=1 runs them on the main thread and pays the main-thread figure."]
    lines += ["", f"Target: speedup >= {TARGET_EFFICIENCY} N at N = {max(workers)}. Notes:", ""]
    lines += [f"- {note}" for note in [*cpu_notes(table), *table.get("notes", [])]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--units", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4, help="turns per unit (its first sessions')")
    parser.add_argument("--questions", type=int, default=2, help="questions per unit")
    parser.add_argument("--data", default="data/locomo10.json")
    for name, value in LatencyModel().__dict__.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value, help="latency model")
    parser.add_argument("--note", action="append", default=[], help="a line for the table's notes (repeatable)")
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    workers = [int(n) for n in args.workers.split(",")]
    model = LatencyModel(**{k: getattr(args, k) for k in LatencyModel().__dict__})
    units = development_units(args.data, args.units, args.turns, args.questions)
    cfg = compose([])
    from hydra.utils import instantiate

    from omegaconf import OmegaConf

    embedder = instantiate({**OmegaConf.to_container(cfg.embedder, resolve=False), "cache_path": None})  # type: ignore[dict-item]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stop still closes the simulated server (finally)
    embedder.encode(["warm"])
    probe = thread_probe(embedder)
    print(json.dumps({"thread_probe": probe}), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    table: dict[str, Any] = {}
    server = ServerProcess(model)
    try:
        for name in args.systems.split(","):
            for n in workers:
                try:
                    row = measure(name, units, n, server, embedder, cfg.answerer)
                except Exception as err:  # noqa: BLE001 - one system's failure is recorded, the others still run
                    row = {"system": name, "workers": n, "error": f"{type(err).__name__}: {str(err)[:500]}"}
                print(json.dumps(row), flush=True)
                rows.append(row)
                table = {
                    "label": LABEL, "simulation": True, "harness_only": True,
                    "command": " ".join(["python -m research.bench_concurrency", *(argv if argv is not None else sys.argv[1:])]),
                    "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count(), "niceness": os.nice(0), "python": platform.python_version(),
                    "latency_model": model.__dict__, "workers": workers, "units": len(units),
                    "unit_note": f"LoCoMo development conversations (not conv-49), first {args.turns} turns and {args.questions} questions each, repeated",
                    "thread_probe": probe, "runs": rows, "summary": summarise([r for r in rows if "error" not in r]), "notes": args.note,
                }  # fmt: skip
                (out / "concurrency.json").write_text(json.dumps(table, indent=2) + "\n")  # after each run: a stop keeps what ran
                (out / "concurrency.md").write_text(markdown(table))
    finally:
        server.close()
    print(markdown(table))
    return table


if __name__ == "__main__":
    main()
