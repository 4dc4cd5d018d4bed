"""Detector-level harness for calibrating mosaic.conflict on a DEV suite (eval suites are refused).

Each context turn becomes one Entity in a real MemoryGraph (no extraction, so this measures the
detector alone); every probe is checked against it. Per-case scores are written to
``results/conflict_dev/<suite>__<tag>.jsonl`` and a threshold sweep (detection and false alarms
per threshold) to ``..._sweep.json``. LLM responses are cached, so re-sweeping is free.

The LLM, the embedder and the detector's settings come from conf/ exactly as ``run.py system=mosaic``
composes them (conf/llm/, conf/embedder/, conf/system/mosaic.yaml ``conflict``, caches under ``cache_dir``);
trailing Hydra overrides change them, e.g. ``system.conflict.n_facts=5`` or ``llm.model=<name>``. The sweep
itself always scores every check: the threshold is set to 0 and the "why?" call is off.

    flock /tmp/mosaic-llm.lock .venv/bin/python -m research.tune_conflict \
        --suite data/conflicts/household_finance.json --tag default [system.conflict.n_facts=5 ...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from sklearn.metrics import roc_auc_score

from core.embed import SentenceEmbedder
from core.llm import LocalLLM
from eval.benchmarks.conflict.suite import EvaluationSuiteError, Suite, load_suite, require_dev_suite
from mosaic.conflict import ConflictDetector
from mosaic.entity import Entity
from mosaic.graph import MemoryGraph

REPO = Path(__file__).resolve().parents[1]
# What the sweep needs of the detector whatever conf/ says: every check scored, no explanation call.
SWEEP_SETTINGS = {"threshold": 0.0, "explain": False}


def graph_from_context(suite: Suite, context_id: str, embedder: SentenceEmbedder) -> MemoryGraph:
    """One entity per context turn, linked in G_A by the graph's own rule."""
    graph = MemoryGraph(embedder)
    turns = suite.context_turns(context_id, session_time="2024-01-01T00:00:00")
    vectors = embedder.encode([t.text for t in turns])
    for turn, vec in zip(turns, vectors):
        graph.add_entity(
            Entity(entity_id=turn.turn_id, text=turn.text, type="persona", source_turn_ids=[turn.turn_id], session_time=turn.session_time),
            vector=vec,
        )
    return graph


def load_dev_suite(path: str) -> Suite:
    """The suite at ``path`` if it is a dev suite; exits naming the reason for an evaluation suite
    (its split field, or its content even when renamed or relabelled)."""
    try:
        return require_dev_suite(load_suite(path))
    except EvaluationSuiteError as err:
        raise SystemExit(str(err)) from err


def compose_config(overrides: list[str]) -> DictConfig:
    """conf/config.yaml with MOSAIC as the system (as ``run.py system=mosaic``) and ``overrides`` on top.

    Hydra's runtime settings are registered as ``run.py`` has them, so ``cache_dir``'s default (the
    directory the command is started from, ``.cache``) resolves the same way."""
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["system=mosaic", *overrides], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def detector_settings(cfg: DictConfig, mode: str) -> dict[str, Any]:
    """The detector's keyword arguments: conf's ``system.conflict`` section, the judgement ``mode`` and SWEEP_SETTINGS."""
    section = OmegaConf.to_container(cfg.system.conflict, resolve=True)
    assert isinstance(section, dict)
    settings = {key: value for key, value in section.items() if not str(key).startswith("_")}
    return {**settings, "mode": mode, **SWEEP_SETTINGS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", required=True)
    parser.add_argument("--tag", default="default")
    parser.add_argument("--modes", nargs="+", default=["nli"], help="LLM judgement modes to run in one go (nli, pick)")
    parser.add_argument("--out", default="results/conflict_dev")
    parser.add_argument("--max-false-alarm", type=float, default=0.10)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of conf/, e.g. system.conflict.n_facts=5 llm.model=<name>")
    args = parser.parse_args(argv)
    cfg = compose_config(args.overrides)
    knobs = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in args.overrides if "=" in o}
    suite = load_dev_suite(args.suite)
    embedder = instantiate(cfg.embedder)
    llm = instantiate(cfg.llm)
    graphs = {ctx: graph_from_context(suite, ctx, embedder) for ctx in suite.contexts}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    candidates = []
    for mode in args.modes:
        detector = ConflictDetector(llm, **detector_settings(cfg, mode))
        for row in run_one(suite, graphs, detector, llm, out, f"{args.tag}_{mode}", knobs):
            candidates.append({"mode": mode, **row})
    # Pre-declared selection rule (dev only): highest strict detection with false alarms <= max_false_alarm;
    # ties go to the higher threshold (fewer alarms).
    allowed = [c for c in candidates if c["false_alarm"] <= args.max_false_alarm]
    pool = allowed or candidates
    best = max(pool, key=lambda c: (c["strict"], -c["false_alarm"], c["threshold"]))
    selected = {"mode": best["mode"], "threshold": best["threshold"], "dev_strict_detection": best["strict"],
                "dev_detection": best["detection"], "dev_false_alarm": best["false_alarm"], "knobs": knobs,
                "rule": f"max strict detection s.t. false alarms <= {args.max_false_alarm} on {suite.name}", "met_constraint": bool(allowed)}
    (out / f"{suite.name}__{args.tag}_selected.json").write_text(json.dumps(selected, indent=1))
    print("SELECTED", json.dumps(selected))


def llm_score_auc(rows: list[dict]) -> float | None:
    """ROC AUC of the LLM's score (conflicting vs compatible probes) over the cases the LLM judged.

    Threshold-free: 0.5 means the score does not separate the two at all, whatever the threshold.
    None when one class is missing.
    """
    judged = [r for r in rows if r["decided_by"] == "llm" and r["score"] is not None]
    labels = [bool(r["conflict"]) for r in judged]
    if len(set(labels)) < 2:
        return None
    return float(roc_auc_score(labels, [r["score"] for r in judged]))


def run_one(suite: Suite, graphs: dict, detector: ConflictDetector, llm: LocalLLM, out: Path, tag: str, knobs: dict) -> list[dict]:
    rows = []
    started = time.perf_counter()
    for case in suite.cases:
        probe = Entity(entity_id=f"probe:{case.id}", text=case.probe_text, type="persona", session_time="2024-02-01T00:00:00")
        decisions = detector.check(probe, graphs[case.context])
        trace = detector.last_trace
        gold = suite.gold_turn_ids(case)
        rows.append({
            "id": case.id, "conflict": case.conflict, "type": case.type, "explicit": case.explicit,
            "decided_by": trace.get("decided_by"), "score": trace.get("score"), "pick": trace.get("pick"),
            "numeric": bool(decisions and decisions[0].conflict_type == "numeric" and trace.get("decided_by") == "numeric"),
            "old_id": decisions[0].old_id if decisions else None,
            "gold_in_candidates": bool(gold & {c for c, _ in trace.get("candidates", [])}),
            "gold_in_facts": bool(gold & set(trace.get("facts", []))),
            "strict_pick": bool(decisions and decisions[0].old_id in gold),
            "numeric_best": trace.get("numeric_best"), "labels": trace.get("labels"), "reason": decisions[0].reason if decisions else "",
        })  # fmt: skip
    elapsed = time.perf_counter() - started
    stem = f"{suite.name}__{tag}"
    with (out / f"{stem}.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    sweep = []
    for threshold in np.round(np.arange(0.05, 1.0, 0.025), 3):
        def hit(r: dict) -> bool:
            return r["decided_by"] == "numeric" or (r["score"] is not None and r["score"] >= threshold and (r["pick"] or 0) > 0)

        pos = [r for r in rows if r["conflict"]]
        neg = [r for r in rows if not r["conflict"]]
        sweep.append({
            "threshold": float(threshold),
            "detection": sum(hit(r) for r in pos) / len(pos),
            "strict": sum(hit(r) and r["strict_pick"] for r in pos) / len(pos),
            "false_alarm": sum(hit(r) for r in neg) / len(neg),
            **{t: sum(hit(r) for r in pos if r["type"] == t) / max(1, sum(r["type"] == t for r in pos)) for t in ("numeric", "semantic", "logical")},
        })  # fmt: skip
    auc = llm_score_auc(rows)
    (out / f"{stem}_sweep.json").write_text(json.dumps({"knobs": knobs, "elapsed_s": elapsed, "usage": llm.usage.__dict__,
                                                        "llm_score_auc": auc, "sweep": sweep}, indent=1))
    print(f"== {tag}: {len(rows)} cases in {elapsed:.0f}s; llm calls {llm.usage.calls} (cached {llm.usage.cached_calls}); "
          f"LLM score AUC (conflict vs compatible, LLM-judged cases) {auc if auc is None else round(auc, 3)}")
    for row in sweep:
        print(" ".join(f"{k}={v:.2f}" for k, v in row.items()))
    for row in rows:
        print(row["id"], row["conflict"], row["decided_by"], None if row["score"] is None else round(row["score"], 3), row["pick"], row["old_id"], row["labels"], "" if row["gold_in_facts"] or not row["conflict"] else "GOLD-NOT-SHOWN")
    return sweep


if __name__ == "__main__":
    main()
