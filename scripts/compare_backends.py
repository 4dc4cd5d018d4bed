"""LLM backends compared on the same slices: runs what is missing, then pairs each backend with the first one.

    python -m scripts.compare_backends [--run] [--backend NAME=OVERRIDES ...] [--row NAME=OVERRIDES ...] [--out FILE]

A backend is a ``conf/llm`` option or any overrides (``--backend "qwen7b=llm=vllm llm.base_url=http://gpu:8000"``);
a row is a slice (run.py overrides). Every (row, backend) cell is a run folder, found by its config hash under
``results/runs/``, ``results/published/runs/`` or ``results/published/backends/runs/`` (so a published run is
reused, never redone); ``--run`` starts
``run.py`` for the cells that have none. Each row is then ``scripts.compare_runs`` of the first backend against the
others (paired bootstrap differences, cost per ingested turn, MOSAIC's mechanism counts), and a cost line per
backend (LLM calls, prompt and completion tokens, seconds from metrics.json). Cells with no run are named with
the command that measures them. No LLM call without ``--run``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from core.atomic import write_text_atomic
from eval.runner import read_metrics

# the two local models (conf/llm); the first is the base every other backend is paired with
BACKENDS = {"qwen2.5-coder-0.5b": "llm=local_small", "qwen2.5-coder-1.5b": "llm=local"}
# dev slices only: the LoCoMo quickstart (conv-26, 3 sessions, 20 questions) and the two dev conflict suites
ROWS = {
    "rag, LoCoMo quickstart": "experiment=locomo system=rag",
    "MOSAIC with the oracle extractor, LoCoMo quickstart": "experiment=locomo system=mosaic ablation=oracle_extractor",
    "MOSAIC, LoCoMo quickstart": "experiment=locomo system=mosaic",
    "MOSAIC, conflict household_finance": "experiment=conflict system=mosaic conflict.suite=data/conflicts/household_finance.json",
    "MOSAIC, conflict workplace_policy": "experiment=conflict system=mosaic conflict.suite=data/conflicts/workplace_policy.json",
}
PUBLISHED = Path("results/published")
# Published runs of a backend other than the tables' model live under results/published/backends/runs/: the tables
# (scripts.make_tables) read results/published/runs/ and do not yet tell two LLMs' runs of one slice apart.
REPO = Path(__file__).resolve().parents[1]


def _pairs(items: list[str] | None, default: dict[str, str], flag: str) -> dict[str, str]:
    if not items:
        return dict(default)
    out = {}
    for item in items:
        name, sep, overrides = item.partition("=")
        if not sep or not name or not overrides:
            raise SystemExit(f"{flag} {item!r}: expected NAME=OVERRIDES, e.g. {flag} \"qwen7b=llm=vllm llm.base_url=http://gpu:8000\"")
        out[name] = overrides
    return out


def run_folder(overrides: list[str], results_dir: Path) -> tuple[Path, Path | None]:
    """(the folder run.py would write for these overrides, the finished run found for it: local or published)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from eval.runner import run_dir_for

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # ${hydra:runtime.cwd} resolves as in run.py
    OmegaConf.set_readonly(cfg.hydra, False)
    with open_dict(cfg):
        cfg.hydra.runtime.cwd = str(Path.cwd())
    job = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    target = run_dir_for(job)
    relative = target.relative_to(results_dir)
    for candidate in (target, PUBLISHED / relative, PUBLISHED / "backends" / relative):
        if (candidate / "metrics.json").is_file():
            return target, candidate
    return target, None


def cost_line(run: Path) -> dict[str, Any]:
    """What a run cost: LLM calls, tokens and seconds over all its invocations, as metrics.json records them."""
    meta = read_metrics(run / "metrics.json")["metadata"]
    usage = meta.get("llm_usage") or {}
    provenance = run / "provenance.json"  # one record per invocation (a resumed run has several)
    invocations = json.loads(provenance.read_text()).get("invocations") or [] if provenance.is_file() else []
    seconds = sum(float(i.get("wall_s") or 0) for i in invocations) or meta.get("wall_s_this_invocation")
    return {"model": meta.get("llm_model_id"), "calls": usage.get("calls"), "cached_calls": usage.get("cached_calls"),
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
            "wall_s": seconds, "code": (meta.get("git_sha") or "")[:7], "dirty": meta.get("git_dirty")}  # fmt: skip


def compare_runs(base: Path, others: list[Path]) -> str:
    """``python -m scripts.compare_runs BASE OTHERS...``'s table (paired differences, cost per turn, MOSAIC's mechanism
    counts), run as the command it is: commands share code through eval/, never by importing one another."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "compare.json"
        cmd = [sys.executable, "-m", "scripts.compare_runs", str(base), *map(str, others), "--out", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out.with_suffix(".md").read_text(encoding="utf-8").strip()


def render(cells: dict[str, dict[str, tuple[Path, Path | None]]], backends: dict[str, str], rows: dict[str, str],
           command: str) -> str:  # fmt: skip
    names = list(backends)
    measured = sum(found is not None for row in cells.values() for _, found in row.values())
    lines = ["# LLM backends compared on the same slices", "", f"**{measured} of {len(rows) * len(names)} cells measured** "
             "(the rest are listed at the end with the command that measures each).", "",
             f"Written by `{command}` (no LLM call unless `--run`). Backends: "
             + "; ".join(f"**{n}** (`{backends[n]}`)" for n in names)
             + f". Each row pairs every backend with **{names[0]}** over the same items (`scripts.compare_runs`). "
             "The judge is the run's own LLM (`judge=same`), so a backend changes the answers and the judge together.", ""]  # fmt: skip
    missing = []
    for row, overrides in rows.items():
        found = {n: cells[row][n][1] for n in names if cells[row][n][1] is not None}
        missing += [f"- {row} / {n}: `python run.py {overrides} {backends[n]}`" for n in names if cells[row][n][1] is None]
        lines += [f"## {row}", "", f"`python run.py {overrides} <backend>`", ""]
        if not found:
            lines += ["No backend measured yet.", ""]
            continue
        lines += ["| backend | run | LLM calls (cached) | prompt / completion tokens | wall s (all invocations) | code |", "|---|---|---|---|---|---|"]
        for n, run in found.items():
            c = cost_line(run)
            lines.append(f"| {n} | {run} | {c['calls']} ({c['cached_calls']}) | {c['prompt_tokens']:,} / {c['completion_tokens']:,} | "
                         f"{c['wall_s'] or 0:,.0f} | {c['code']}{' dirty' if c['dirty'] else ''} |")  # fmt: skip
        lines.append("")
        if names[0] in found and len(found) > 1:
            lines += [compare_runs(found[names[0]], [found[n] for n in names[1:] if n in found]), ""]
        elif len(found) == 1:
            lines += ["One backend only: no paired difference yet.", ""]
        else:
            lines += [f"{names[0]} (the base) is not measured: no paired difference yet.", ""]
    lines += ["## Cells not measured", ""] + (missing or ["None."])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", help="NAME=run.py overrides choosing the LLM (repeat; the first is the base)")
    parser.add_argument("--row", action="append", help="NAME=run.py overrides choosing the slice (repeat)")
    parser.add_argument("--run", action="store_true", help="run the cells that have no finished run (one at a time)")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    parser.add_argument("--out", type=Path, default=Path("results/tables/backends.md"))
    args = parser.parse_args(argv)
    backends = _pairs(args.backend, BACKENDS, "--backend")
    rows = _pairs(args.row, ROWS, "--row")
    cells: dict[str, dict[str, tuple[Path, Path | None]]] = {}
    for row, row_overrides in rows.items():
        cells[row] = {}
        for name, llm_overrides in backends.items():
            overrides = shlex.split(row_overrides) + shlex.split(llm_overrides) + [f"results_dir={args.results_dir}"]
            target, found = run_folder(overrides, args.results_dir)
            if found is None and args.run:
                print(f"running {row} / {name}: python run.py {' '.join(overrides)}", flush=True)
                done = subprocess.run([sys.executable, str(REPO / "run.py"), *overrides], check=False)
                found = target if (target / "metrics.json").is_file() else None
                if found is None:
                    print(f"{row} / {name}: run.py exited {done.returncode} without metrics.json", file=sys.stderr)
            cells[row][name] = (target, found)
    command = "python -m scripts.compare_backends" + (" " + " ".join(shlex.quote(a) for a in argv) if argv else "")
    text = render(cells, backends, rows, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, text)  # a table is replaced whole or not at all
    print(text, args.out, sep="\n")
    return text


if __name__ == "__main__":
    main()
