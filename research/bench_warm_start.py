"""Warm rerun of the README quickstart against its floor, side by side in one session.

    python -m research.bench_warm_start [--reruns 5] [--out results/bench/warm_start.json] [--no-prepare]

Why: rerunning a finished, cached configuration (``run.py experiment=locomo`` a second time) should cost
little more than starting Python and composing the config; anything heavy imported on that path (pandas,
torch, sentence-transformers, a baseline's library, plotting) shows up as the gap between the two.

First the quickstart runs once untimed, so its run folder is finished (from the LLM response cache when it
is warm; a cold cache asks the LLM). Then, alternating so that machine noise falls on both:

* ``warm_rerun_s``: wall time of ``python run.py experiment=locomo``, which finds the finished run folder,
  reads it and prints its table and the metrics path (the script checks that it did, so a rerun that did
  work is not timed as a warm one);
* ``floor_s``: wall time of a Python process that imports Hydra and composes the same config, and nothing else.

Each is the median of ``--reruns`` processes. The load average is recorded beside them (a busy machine
moves both). Both run with bytecode caching on, as a user's machine has it (PYTHONDONTWRITEBYTECODE is
dropped; PYTHONPYCACHEPREFIX, when set, is kept and recorded). Writes ``--out`` (JSON) with every sample, and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ["run.py", "experiment=locomo"]
FLOOR = ("import hydra\nfrom hydra import compose, initialize_config_dir\n"
         "with initialize_config_dir(config_dir=%r, version_base='1.3'):\n"
         "    compose(config_name='config', overrides=['experiment=locomo'], return_hydra_config=True)\n")  # fmt: skip
FINISHED_LOG = "this configuration already finished"


def _env() -> dict[str, str]:
    """The caller's environment, with bytecode caching on: a user's second run imports compiled modules
    (PYTHONDONTWRITEBYTECODE would recompile every module on every start, in both timings alike)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=_env())
    return time.perf_counter() - started, done


def warm_rerun() -> float:
    seconds, done = timed([sys.executable, *QUICKSTART])
    if done.returncode != 0:
        raise SystemExit(f"the quickstart rerun failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if FINISHED_LOG not in done.stdout + done.stderr or not last.endswith("metrics.json"):
        raise SystemExit("the rerun did not find a finished run folder (no 'already finished' line): run the quickstart to the end first")
    return seconds


def floor() -> float:
    seconds, done = timed([sys.executable, "-c", FLOOR % str(ROOT / "conf")])
    if done.returncode != 0:
        raise SystemExit(f"composing the config failed: {done.stderr.strip()[-400:]}")
    return seconds


def prepare() -> None:
    """Finish the quickstart under this code: run it (untimed), and when its run folder was finished by other
    code, redo it with overwrite=true (answers come from the LLM response cache), so the timed reruns take the
    path every user's second run takes."""
    from eval.provenance import code_version, same_code

    print("preparing: the quickstart, untimed (a cold LLM cache makes this minutes)", flush=True)
    for extra in ([], ["overwrite=true"]):
        done = subprocess.run([sys.executable, *QUICKSTART, *extra], cwd=ROOT, capture_output=True, text=True, env=_env())
        if done.returncode != 0:
            raise SystemExit(f"the quickstart failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
        metrics = json.loads((ROOT / done.stdout.strip().splitlines()[-1]).read_text())
        if same_code(metrics.get("metadata", {}).get("code_at_end") or {}, code_version()):
            return
        print("its run folder was finished by other code: redoing it with overwrite=true", flush=True)
    raise SystemExit("the quickstart's run folder still records other code after overwrite=true")


def git_sha() -> str:
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return sha + ("-dirty" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research.bench_warm_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reruns", type=int, default=5, help="processes timed for each of the two (median reported)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "warm_start.json")
    parser.add_argument("--no-prepare", action="store_true", help="skip the untimed first run (the run folder is finished already)")
    args = parser.parse_args(argv)
    if not args.no_prepare:
        prepare()
    warm_rerun()  # one untimed pass of each so the OS file cache holds the same files for every timed one
    floor()
    load_before = os.getloadavg()
    warm, bare = [], []
    for _ in range(args.reruns):
        warm.append(round(warm_rerun(), 3))
        bare.append(round(floor(), 3))
    result = {
        "warm_rerun_s": round(statistics.median(warm), 3),
        "floor_s": round(statistics.median(bare), 3),
        "warm_rerun_samples_s": warm,
        "floor_samples_s": bare,
        "reruns": args.reruns,
        "warm_rerun_command": "python " + " ".join(QUICKSTART),
        "floor_command": "python -c 'import hydra; compose the same config (conf/, experiment=locomo)'",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        # more runnable processes than cores when it started: both numbers are then inflated by other work
        "machine_busy": load_before[0] > (os.cpu_count() or 1),
        "bytecode_cache": os.environ.get("PYTHONPYCACHEPREFIX") or "__pycache__ beside each module",
        "python": platform.python_version(),
        "git_sha": git_sha(),
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m research.bench_warm_start " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
