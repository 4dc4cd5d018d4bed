"""Evidence recall of MOSAIC's read path under retrieval variants, from a finished run's memory, with no LLM.

    python -m research.retrieval_probe <mosaic run folder> [--variant NAME KEY=VALUE ...]... [--out FILE]

e.g. ``--variant turn_matching retrieval.match_source_turns=true --variant exact retrieval.mode=exact``.

Why: answering and judging cost about 17 s per question on this machine, so trying a read-path change on
a whole conversation costs about 45 minutes of LLM time; its evidence recall costs none. The probe
rebuilds the run's MOSAIC from its ``config.yaml`` (each variant adds ``system.*`` overrides, given
without the ``system.`` prefix), loads the persisted memory (``system/mosaic/*.json``), asks every
question of the run's ``predictions.jsonl`` with the run's top-k, and reports evidence recall per
variant and per category, with the paired bootstrap difference of each variant minus the first
(``baseline``: the run's own settings).

Two differences from the run itself, both printed: with no LLM, a dual-path query that LSH is unsure
of takes the no-LLM fallback (multiprobe, centroids) where the run asked the LLM to route; and a
memory loaded from its file has its communities detected afresh, not grown write by write. So the
baseline row is set beside the run's recorded evidence recall, and the variants are compared with the
baseline, never with the run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from eval.compare import paired_difference
from eval.metrics import evidence_recall
from eval.provenance import code_label, code_version
from core.config_check import check_config
from eval.runner import build_system, read_metrics
from research.error_analysis import run_embedder, rows_by_key


def probe(run: Path, variants: dict[str, list[str]], embedder: Any = None, namespace_prefix: str = "locomo:") -> dict[str, Any]:
    """Evidence recall of each variant over the run's questions with gold evidence (see module doc); ``embedder``
    defaults to the run's own."""
    memories = run / "system" / "mosaic"
    if not any(memories.glob("*.json")):
        raise SystemExit(f"{memories}: no MOSAIC memory files; the folder must be a MOSAIC run with persist=true")
    config = OmegaConf.load(run / "config.yaml")
    top_k = int(config.benchmark.top_k)
    questions = [row for row in rows_by_key(run, "predictions").values() if row.get("evidence")]
    embedder = embedder if embedder is not None else run_embedder(run)
    recalls: dict[str, dict[str, float]] = {}
    rows: dict[str, Any] = {}
    for name, overrides in variants.items():
        cfg = OmegaConf.merge(config, OmegaConf.from_dotlist([f"system.{o.removeprefix('system.')}" for o in overrides]))
        with tempfile.TemporaryDirectory() as scratch:
            shutil.copytree(memories, Path(scratch) / "system" / "mosaic")
            check_config(OmegaConf.to_container(cfg.system, resolve=True), "system")  # no validate() runs here
            system = build_system(cfg, None, embedder, Path(scratch))
            per_question: dict[str, float] = {}
            by_category: dict[str, list[float]] = defaultdict(list)
            for question in questions:
                hits = system.search(f"{namespace_prefix}{question['sample_id']}", question["question"], top_k)
                recall = evidence_recall(question["evidence"], [t for hit in hits for t in hit.source_turn_ids])
                assert recall is not None
                per_question[question["key"]] = recall
                by_category[str(question.get("category"))].append(recall)
            mechanisms = system.metrics()["mechanisms"]["retrieval"]
        recalls[name] = per_question
        rows[name] = {
            "overrides": overrides,
            "evidence_recall": 100 * sum(per_question.values()) / len(per_question),
            "by_category": {c: {"n": len(v), "evidence_recall": 100 * sum(v) / len(v)} for c, v in sorted(by_category.items())},
            "lsh_confident_hits": mechanisms["lsh_confident_hits"],
            "no_llm_fallbacks": sum(mechanisms["other_fallbacks"].values()),
            "turn_matches": mechanisms["turn_matches"],
            "candidates_scanned_mean": mechanisms["candidates_scanned"]["mean"],
        }
    base = next(iter(recalls))
    for name in rows:
        if name != base:
            diff = paired_difference(recalls[base], recalls[name])
            rows[name]["minus_" + base] = {key: 100 * diff[key] for key in ("mean", "ci_low", "ci_high")}
    recorded = (read_metrics(run / "metrics.json").get("overall", {}).get("evidence_recall") or {}).get("mean")
    return {"run": str(run), "code": code_label(code_version()), "top_k": top_k, "n_questions": len(questions), "recorded_evidence_recall": recorded,
            "per_question": recalls, "variants": rows}


def to_markdown(result: dict[str, Any]) -> str:
    recorded = result["recorded_evidence_recall"]
    lines = [f"Evidence recall@{result['top_k']} over {result['n_questions']} questions with gold evidence, "
             f"from the memory of `{result['run']}` at code {result['code']} (no LLM; the run recorded "
             f"{'n/a' if recorded is None else format(100 * recorded if recorded <= 1 else recorded, '.1f')}).", "",
             "| variant | overrides | evidence recall | minus baseline [95% CI] | LSH hits | no-LLM fallbacks | turn matches | scanned/query |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in result["variants"].items():
        diff = next((v for k, v in row.items() if k.startswith("minus_")), None)
        cell = f"{diff['mean']:+.1f} [{diff['ci_low']:+.1f}, {diff['ci_high']:+.1f}]" if diff else ""
        lines.append(f"| {name} | {' '.join(row['overrides']) or '(run settings)'} | {row['evidence_recall']:.1f} | {cell} | "
                     f"{row['lsh_confident_hits']} | {row['no_llm_fallbacks']} | {row['turn_matches']} | {row['candidates_scanned_mean']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a finished LoCoMo run folder of system=mosaic (persist=true)")
    parser.add_argument("--variant", nargs="+", action="append", default=[], metavar=("NAME", "KEY=VALUE"),
                        help="a name and system.* overrides (prefix optional); repeatable")
    parser.add_argument("--out", type=Path, default=None, help="write JSON here (and .md beside it)")
    args = parser.parse_args(argv)
    variants = {"baseline": []} | {name: list(overrides) for name, *overrides in args.variant}
    result = probe(args.run, variants)
    markdown = to_markdown(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    return result


if __name__ == "__main__":
    main()
