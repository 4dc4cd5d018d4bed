"""Which step-3 judgement finds HaluMem's updates? The conflict check's LLM judge alone, on the development user.

    .venv/bin/python -m research.halumem_revision_probe                        # nli and revise, dev user 0
    .venv/bin/python -m research.halumem_revision_probe --modes nli pick revise system.conflict.n_facts=5

A writes-only oracle run (``run.py experiment=halumem_dev ablation=oracle_extractor ...``) takes about half an hour
per setting and mixes the judge with the gate, the numeric rule and what the memory happens to hold. This probe
isolates the judge, so that a mode and its threshold can be chosen on dev before such a run confirms it: every
non-interference gold point of the user is written in order into a held list (the oracle extractor's facts, with
nothing superseded or gated), and before each write the judge of every ``--modes`` entry sees the held points
nearest it, as the conflict check shows them (cosine >= ``conflict.min_similarity``, the ``conflict.n_facts``
nearest; none asked when the nearest is a restatement, cosine >= ``conflict.duplicate_similarity``). A judged
update point is ``right`` when its score reaches the threshold and the blamed fact is one it replaces (a held point
at cosine >= the benchmark's ``link_held_similarity`` with one of its original memories), ``wrong`` when it reaches
it on another; a non-update point that reaches it is a false alarm. The sweep over thresholds is written to
``results/bench/halumem_revision_probe_dev.{json,md}``. Development data only: the evaluation user is refused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf
from sklearn.metrics import roc_auc_score
from tqdm import tqdm

from eval.benchmarks.halumem.data import load_halumem_jsonl
from mosaic.conflict import ConflictDetector
from research.halumem_link_calibration import DEV_FILE, evaluation_user_refusal
from research.tune_conflict import compose_config, detector_settings

THRESHOLDS = [round(float(t), 2) for t in np.arange(0.05, 1.0, 0.05)]


def probe(path: Path, detectors: dict[str, ConflictDetector], encode: Any, n_facts: int, min_similarity: float,
          duplicate_similarity: float, held_similarity: float) -> list[dict[str, Any]]:
    """One row per non-interference point that has earlier points: its kind, the shown facts that it replaces, and
    each mode's (score, pick). The modes judge one after the other, each over every point, so that each keeps its
    few-shot prefix in the server's prompt cache (alternating them per point re-reads both prefixes every call)."""
    rows = []
    asks: list[tuple[dict[str, Any], list[str], str]] = []
    for user in load_halumem_jsonl(path):
        held: list[str] = []
        vectors: list[np.ndarray] = []
        points = [(s, p) for s, session in enumerate(user.sessions) for p in session.memory_points if not p.is_interference]
        for session_index, point in points:
            vector = np.asarray(encode([point.content]))[0]
            if held:
                sims = np.stack(vectors) @ vector
                order = [int(i) for i in np.argsort(-sims, kind="stable") if sims[i] >= min_similarity][:n_facts]
                targets: set[int] = set()
                if point.is_searched_update:
                    originals = np.asarray(encode(list(point.original_memories)))
                    targets = set(np.flatnonzero((np.stack(vectors) @ originals.T).max(axis=1) >= held_similarity).tolist())
                kind = ("update" if targets else "update_no_target") if point.is_searched_update else "other"
                row: dict[str, Any] = {"session": session_index, "index": point.index, "kind": kind,
                                       "target_rank": min((order.index(t) + 1 for t in targets if t in order), default=None),
                                       "targets_shown": [order.index(t) + 1 for t in targets if t in order]}  # fmt: skip
                if not order:
                    row["decided_by"] = "no_candidates"
                elif sims[order[0]] >= duplicate_similarity:
                    row["decided_by"] = "duplicate"
                else:
                    row["decided_by"] = "llm"
                    asks.append((row, [held[i] for i in order], point.content))
                rows.append(row)
            held.append(point.content)
            vectors.append(vector)
    for mode, detector in detectors.items():
        for row, texts, new_text in tqdm(asks, desc=f"judge ({mode})", unit="point"):
            score, pick, _, _ = detector.judge_texts(texts, new_text)
            row[mode] = {"score": round(float(score), 4), "pick": int(pick)}
    return rows


def sweep(rows: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """Per threshold: update points linked right / wrong (of those whose replaced fact was held), false alarms."""
    updates = [r for r in rows if r["kind"] == "update"]
    others = [r for r in rows if r["kind"] == "other"]
    out = []
    for threshold in THRESHOLDS:
        def fires(r: dict[str, Any]) -> bool:
            return r["decided_by"] == "llm" and r[mode]["score"] >= threshold and r[mode]["pick"] > 0

        out.append({"threshold": threshold,
                    "right": sum(fires(r) and r[mode]["pick"] in r["targets_shown"] for r in updates),
                    "wrong": sum(fires(r) and r[mode]["pick"] not in r["targets_shown"] for r in updates),
                    "false_alarms": sum(fires(r) for r in others)})  # fmt: skip
    return out


def separation(rows: list[dict[str, Any]], mode: str) -> float | None:
    """ROC AUC of a mode's score, update points (replaced fact held) against non-update points, over the judged ones:
    threshold-free; 0.5 is no separation, below 0.5 the score points the wrong way. None when a class is missing."""
    judged = [r for r in rows if r["decided_by"] == "llm" and r["kind"] in ("update", "other") and mode in r]
    labels = [r["kind"] == "update" for r in judged]
    if len(set(labels)) < 2:
        return None
    return round(float(roc_auc_score(labels, [r[mode]["score"] for r in judged])), 3)


def markdown(result: dict[str, Any]) -> str:
    counts = result["counts"]
    lines = [f"# Step-3 judge on HaluMem's updates (development user, `{result['file']}`)", "",
             f"Points judged: {counts['update']} updates whose replaced fact was held ({counts['update_shown']} of them with it "
             f"among the shown facts), {counts['other']} non-update points; {counts['duplicate']} restatements and "
             f"{counts['no_candidates']} points with no candidate were not asked. Settings: {result['settings']}. "
             f"{result['elapsed_s']:.0f} s, {result['calls']} LLM calls. Command: `{result['command']}` at {result['git_sha']}.", "",
             "| threshold | " + " | ".join(f"{m}: right / wrong / false alarms" for m in result["modes"]) + " |",
             "|---|" + "---|" * len(result["modes"])]  # fmt: skip
    for i, threshold in enumerate(THRESHOLDS):
        cells = [f"{s[i]['right']} / {s[i]['wrong']} / {s[i]['false_alarms']}" for s in (result["sweeps"][m] for m in result["modes"])]
        lines.append(f"| {threshold:.2f} | " + " | ".join(cells) + " |")
    lines += ["", "Score separation, update points against non-update points (ROC AUC; 0.5 = none): "
              + ", ".join(f"{m} {result['auc'].get(m)}" for m in result["modes"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", type=Path, default=DEV_FILE)
    parser.add_argument("--modes", nargs="+", default=["nli", "revise"])
    parser.add_argument("--out", type=Path, default=Path("results/bench/halumem_revision_probe_dev"))
    parser.add_argument("--rescore", type=Path, default=None,
                        help="a probe's JSON: recompute its sweeps and separation from its rows (no LLM) and rewrite both files")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of conf/, e.g. system.conflict.n_facts=5")
    args = parser.parse_args(argv)
    if args.rescore is not None:
        result = json.loads(args.rescore.read_text())
        result["sweeps"] = {mode: sweep(result["rows"], mode) for mode in result["modes"]}
        result["auc"] = {mode: separation(result["rows"], mode) for mode in result["modes"]}
        args.rescore.write_text(json.dumps(result, indent=1))
        args.rescore.with_suffix(".md").write_text(markdown(result))
        print(markdown(result))
        return 0
    refusal = evaluation_user_refusal(args.file)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    if not args.file.exists():
        print(f"error: {args.file} not found; run `python -m scripts.download_data` (it fetches the HaluMem pilot users)", file=sys.stderr)
        return 2
    cfg = compose_config(["benchmark=halumem", *args.overrides])
    embedder = instantiate(cfg.embedder)
    llm = instantiate(cfg.llm)
    detectors = {mode: ConflictDetector(llm, **detector_settings(cfg, mode)) for mode in args.modes}
    conflict = OmegaConf.to_container(cfg.system.conflict, resolve=True)
    assert isinstance(conflict, dict)
    settings = {key: conflict[key] for key in ("n_facts", "min_similarity", "duplicate_similarity")}
    settings["link_held_similarity"] = float(cfg.benchmark.link_held_similarity)
    started = time.perf_counter()
    rows = probe(args.file, detectors, embedder.encode, int(settings["n_facts"]), float(settings["min_similarity"]),
                 float(settings["duplicate_similarity"]), settings["link_held_similarity"])
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    kinds = [r["kind"] for r in rows if r["decided_by"] == "llm"]
    result = {
        "file": str(args.file), "modes": args.modes, "settings": settings, "git_sha": sha,
        "command": "python -m research.halumem_revision_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "elapsed_s": time.perf_counter() - started, "calls": llm.usage.calls,
        "counts": {"update": kinds.count("update"), "other": kinds.count("other"),
                   "update_shown": sum(r["kind"] == "update" and r["decided_by"] == "llm" and bool(r["targets_shown"]) for r in rows),
                   "duplicate": sum(r["decided_by"] == "duplicate" for r in rows),
                   "no_candidates": sum(r["decided_by"] == "no_candidates" for r in rows)},
        "sweeps": {mode: sweep(rows, mode) for mode in args.modes}, "auc": {mode: separation(rows, mode) for mode in args.modes},
        "rows": rows,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
