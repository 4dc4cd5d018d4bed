"""Calibrate a LoCoMo judge on the locomo-audit bank: how often it accepts wrong answers and gold ones.

    python -m scripts.calibrate_judge                                  # default judge and prompt, report split
    python -m scripts.calibrate_judge judge/prompt=strict              # another prompt (conf/judge/prompt/)
    python -m scripts.calibrate_judge judge/prompt=strict calibration.split=dev   # tune on dev only
    python -m scripts.calibrate_judge judge=local judge.llm.model=<gguf>          # another judge model
    python -m scripts.calibrate_judge judge=calibrated                 # fit the calibrated judge's threshold

The judge is built by the project's one judge builder (eval.judge.build_judge), so every setting of
conf/judge/<name>.yaml (max_tokens, attempts, ...) is the one used. Settings: conf/calibrate_judge.yaml.

A reasoning judge writes results/judge/<judge model>__<prompt>.json (report split) or ..._dev.json, with
per-item rows; LoCoMo tables read the report file next to judge accuracy.

A calibrated judge (one token, P(correct) from log-probabilities; conf/judge/calibrated.yaml) is judged on
two disjoint halves of the bank (``threshold_fit``): the threshold is fitted on the fit half (the strictest
one that keeps gold answers accepted at the target rate) and the rates at it are reported on the held-out
half, beside the targets; writes ``threshold_fit.out`` (.json with every P(correct), .md) and the ROC curves
of both halves as a PNG. The fitted threshold is then copied into conf/judge/calibrated.yaml
(tests/unit/eval/test_judge_builder.py checks that the two agree).

LLM responses are cached, so an interrupted run resumes for free.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from eval.judge import AnswerJudge, build_judge
from eval.benchmarks.locomo.judge_calibration import (
    acceptance,
    at_threshold,
    calibration_key,
    fit_threshold,
    judge_sample,
    load_bank,
    rates,
    roc,
    slices,
    split_sample,
)


def compose_config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("calibrate_judge", overrides=overrides)


def calibrate(cfg: DictConfig, judge: AnswerJudge) -> dict[str, Any]:
    """Judge the configured sample with ``judge`` (a reasoning judge); return the record."""
    cal = cfg.calibration
    items = load_bank(Path(cal.bank_dir), list(cal.held_out_conversations))
    sample = split_sample(items, cal.split, int(cal.dev_per_stratum), int(cal.report_per_stratum), int(cal.seed))
    if cal.get("max_questions") is not None:  # a quicker look at the first N of the split (still disjoint)
        sample = sample[: int(cal.max_questions)]
    started = time.time()
    with tqdm(total=len(sample) * len(cal.strata), desc=f"judge ({judge.prompt.name}, {cal.split})", unit="call") as bar:
        rows = judge_sample(judge.judge, sample, list(cal.strata), progress=lambda: bar.update(1), workers=int(cal.workers))
    return {
        "judge_model_id": judge.llm.model_id,
        "prompt": judge.prompt.name,
        "split": str(cal.split),
        "questions": len(sample),
        "seed": int(cal.seed),
        "dev_per_stratum": int(cal.dev_per_stratum),
        "report_per_stratum": int(cal.report_per_stratum),
        "held_out_conversations": list(cal.held_out_conversations),
        "rates": rates(rows, int(cal.bootstrap_samples), int(cal.seed)),
        "bank": "github.com/dial481/locomo-audit (ap_v2 vague-wrong, ap_v1 specific-wrong, gold answers)",
        "wall_s": round(time.time() - started, 1),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "items": rows,
    }


def output_path(cfg: DictConfig, record: dict[str, Any]) -> Path:
    stem = calibration_key(record["judge_model_id"], record["prompt"])
    return Path(cfg.calibration.out_dir) / (f"{stem}.json" if record["split"] == "report" else f"{stem}__{record['split']}.json")


def fit(cfg: DictConfig, judge: Any, command: str) -> dict[str, Any]:
    """Judge the fit slice and the held-out slice with a calibrated judge (and any slice looked at before, for the
    record), fit its threshold on the fit slice and report the held-out one."""
    cal, tf = cfg.calibration, cfg.threshold_fit
    items = load_bank(Path(cal.bank_dir), list(tf.held_out_conversations))
    held_out_slice, inspected = int(tf.held_out_slice), [int(k) for k in tf.inspected_slices]
    if held_out_slice < 1 or held_out_slice in inspected or 0 in inspected:
        raise ValueError(f"threshold_fit.held_out_slice={held_out_slice}: must be >= 1 and not among inspected_slices {inspected}")
    parts = slices(items, int(tf.per_half), int(tf.seed), max(held_out_slice, *inspected, 0) + 1)
    named = {"fit": parts[0], "held_out": parts[held_out_slice], **{f"inspected_{k}": parts[k] for k in inspected}}
    started = time.time()
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, half in named.items():
        with tqdm(total=len(half) * len(cal.strata), desc=f"calibrated judge ({name} half)", unit="call") as bar:
            rows[name] = judge_sample(judge.judge, half, list(cal.strata), progress=lambda: bar.update(1), workers=int(cal.workers))
    targets = OmegaConf.to_container(tf.targets, resolve=True)
    assert isinstance(targets, dict)
    threshold = fit_threshold(rows["fit"], float(targets["gold_accept_min"]), str(tf.rule))

    def measured(half_rows: list[dict[str, Any]]) -> dict[str, float | None]:
        return {s: acceptance(half_rows, s, threshold) for s in ("gold", "vague_wrong", "specific_wrong")}

    got = measured(rows["held_out"])
    reached = {
        "gold_accept_min": got["gold"] is not None and got["gold"] >= targets["gold_accept_min"],
        "vague_accept_max": got["vague_wrong"] is not None and got["vague_wrong"] <= targets["vague_accept_max"],
        "specific_accept_max": got["specific_wrong"] is not None and got["specific_wrong"] <= targets["specific_accept_max"],
    }
    return {
        "command": command,
        "judge_model_id": judge.llm.model_id,
        "prompt": judge.prompt.name,
        "top_logprobs": judge.top_logprobs,
        "fitted_threshold": threshold,
        "rule": str(tf.rule),
        "rule_note": str(tf.rule_note),
        "targets": targets,
        "held_out_slice": held_out_slice,
        "held_out_acceptance": got,
        "targets_reached_on_held_out": reached,
        "held_out_rates": rates(at_threshold(rows["held_out"], threshold), int(cal.bootstrap_samples), int(cal.seed)),
        "fit_rates": rates(at_threshold(rows["fit"], threshold), int(cal.bootstrap_samples), int(cal.seed)),
        "inspected_slices_acceptance": {k: measured(rows[f"inspected_{k}"]) for k in inspected},
        "roc": {name: roc(half_rows) for name, half_rows in rows.items()},
        "questions_per_half": int(tf.per_half),
        "seed": int(tf.seed),
        "held_out_conversations": list(tf.held_out_conversations),
        "bank": "github.com/dial481/locomo-audit (ap_v2 vague-wrong, ap_v1 specific-wrong, gold answers)",
        "wall_s": round(time.time() - started, 1),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "items": rows,
    }


def roc_figure(record: dict[str, Any], path: Path) -> None:
    """Both halves' ROC curves (gold accepted against wrong answers accepted), the fitted threshold marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharey=True)
    threshold = record["fitted_threshold"]
    for ax, half in zip(axes, ("fit", "held_out")):
        for stratum, style in (("vague_wrong", "-"), ("specific_wrong", "--"), ("both_wrong", ":")):
            curve = record["roc"][half].get(stratum)
            if curve:
                ax.plot(curve["false_accept"], curve["gold_accept"], style, label=f"{stratum} (AUC {curve['auc']:.2f})")
        rows = record["items"][half]
        for stratum, marker in (("vague_wrong", "o"), ("specific_wrong", "s")):
            x, y = acceptance(rows, stratum, threshold), acceptance(rows, "gold", threshold)
            if x is not None and y is not None:
                ax.plot([x], [y], marker, color="black")
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.5)
        ax.set_title(f"{half.replace('_', '-')} half (markers: threshold {threshold:.3f})")
        ax.set_xlabel("wrong answers accepted")
        ax.legend(loc="lower right", fontsize=8)
    axes[0].set_ylabel("gold answers accepted")
    fig.suptitle(f"LoCoMo calibrated judge ({record['judge_model_id']}, prompt {record['prompt']}) on locomo-audit")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fit_markdown(record: dict[str, Any]) -> str:
    """The calibration file's readable view: threshold, held-out rates against the targets, AUCs."""
    t, got, ok = record["targets"], record["held_out_acceptance"], record["targets_reached_on_held_out"]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 100:.1f}%"

    def ci(stratum: str) -> str:
        cell = record["held_out_rates"].get(stratum, {})
        stat = cell.get("true_accept" if stratum == "gold" else "false_accept") or {}
        return "" if stat.get("mean") is None else f"[{stat['ci_low'] * 100:.1f}, {stat['ci_high'] * 100:.1f}], n={stat['n']}, failures {cell['judge_failures']}"

    lines = [
        f"# LoCoMo calibrated judge: {record['judge_model_id']}, prompt `{record['prompt']}`",
        "",
        f"Made by `{record['command']}`.",
        "",
        f"Fitted threshold on P(correct): **{record['fitted_threshold']:.4f}** (rule `{record['rule']}`, "
        "eval.benchmarks.locomo.judge_calibration.fit_threshold, on the fit half: "
        f"{record['questions_per_half']} questions x 3 strata). Held-out half: slice {record['held_out_slice']} of the same "
        f"permutation, {record['questions_per_half']} other questions. {record['rule_note']}",
        "",
        "| held-out half | accepted at the threshold | 95% CI | target | reached |",
        "|---|---|---|---|---|",
        f"| gold answers | {pct(got['gold'])} | {ci('gold')} | >= {t['gold_accept_min'] * 100:.0f}% | {'yes' if ok['gold_accept_min'] else 'no'} |",
        f"| vague-wrong answers | {pct(got['vague_wrong'])} | {ci('vague_wrong')} | <= {t['vague_accept_max'] * 100:.0f}% | {'yes' if ok['vague_accept_max'] else 'no'} |",
        f"| specific-wrong answers | {pct(got['specific_wrong'])} | {ci('specific_wrong')} | <= {t['specific_accept_max'] * 100:.0f}% | {'yes' if ok['specific_accept_max'] else 'no'} |",
        "",
        "ROC AUC (gold against wrong answers): " + "; ".join(
            f"{half.replace('_', '-')} half " + ", ".join(f"{s} {c['auc']:.2f}" for s, c in record["roc"][half].items()) for half in record["roc"]
        ) + ".",
        "",
        *[f"Slice {k} (looked at before this rule was fixed), at this threshold: gold {pct(a['gold'])}, vague-wrong "
          f"{pct(a['vague_wrong'])}, specific-wrong {pct(a['specific_wrong'])}." for k, a in record.get("inspected_slices_acceptance", {}).items()],
        "",
        f"Questions of conversation positions {record['held_out_conversations']} are never sampled (conv-26 is the "
        "locomo_qa judge bank's, data/judge_banks/locomo_qa.jsonl; conv-49 is for measurement).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__)
        return 0
    cfg = compose_config(overrides)
    judge = build_judge(cfg.judge, cfg.llm)  # the one judge builder: class, client, prompt and every setting
    command = " ".join(["python -m scripts.calibrate_judge", *overrides])
    try:
        record = fit(cfg, judge, command) if hasattr(judge, "threshold") else calibrate(cfg, judge)
    finally:
        close = getattr(judge.llm, "close", None)
        if close:
            close()
    if "fitted_threshold" in record:
        out = Path(cfg.threshold_fit.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        out.with_suffix(".md").write_text(fit_markdown(record), encoding="utf-8")
        roc_figure(record, out.with_name(out.name + "_roc.png"))
        print(fit_markdown(record))
        print(out.with_suffix(".json"))
        return 0
    path = output_path(cfg, record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for stratum, cell in record["rates"].items():
        stat = cell["true_accept" if stratum == "gold" else "false_accept"]
        print(f"{stratum:15s} accepted {stat['mean']} [{stat['ci_low']}, {stat['ci_high']}] n={stat['n']} failures={cell['judge_failures']}")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
