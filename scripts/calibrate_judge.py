"""Calibrate a LoCoMo judge on the locomo-audit bank: how often it accepts wrong answers and gold ones.

    python -m scripts.calibrate_judge                                  # default judge and prompt, report split
    python -m scripts.calibrate_judge judge/prompt=strict              # another prompt (conf/judge/prompt/)
    python -m scripts.calibrate_judge judge/prompt=strict calibration.split=dev   # tune on dev only
    python -m scripts.calibrate_judge judge=local judge.llm.model=<gguf>          # another judge model

Settings: conf/calibrate_judge.yaml. Writes results/judge/<judge model>__<prompt>.json (report split)
or ..._dev.json, with per-item rows; LoCoMo tables read the report file next to judge accuracy.
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
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from eval.judge import JudgePrompt, LLMJudge
from eval.benchmarks.locomo.judge_calibration import calibration_key, judge_sample, load_bank, rates, split_sample


def compose_config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("calibrate_judge", overrides=overrides)


def calibrate(cfg: DictConfig, llm: Any) -> dict[str, Any]:
    """Judge the configured sample with ``llm`` under the configured prompt; return the record."""
    cal = cfg.calibration
    prompt = JudgePrompt.from_mapping(OmegaConf.to_container(cfg.judge.prompt, resolve=True))  # type: ignore[arg-type]
    items = load_bank(Path(cal.bank_dir), list(cal.held_out_conversations))
    sample = split_sample(items, cal.split, int(cal.dev_per_stratum), int(cal.report_per_stratum), int(cal.seed))
    if cal.get("max_questions") is not None:  # a quicker look at the first N of the split (still disjoint)
        sample = sample[: int(cal.max_questions)]
    judge = LLMJudge(llm, max_tokens=int(cal.judge_max_tokens), prompt=prompt)
    started = time.time()
    with tqdm(total=len(sample) * len(cal.strata), desc=f"judge ({prompt.name}, {cal.split})", unit="call") as bar:
        rows = judge_sample(judge.judge, sample, list(cal.strata), progress=lambda: bar.update(1), workers=int(cal.workers))
    return {
        "judge_model_id": llm.model_id,
        "prompt": prompt.name,
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


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__)
        return 0
    cfg = compose_config(overrides)
    llm = instantiate(cfg.judge.llm) if cfg.judge.get("llm") else instantiate(cfg.llm)
    try:
        record = calibrate(cfg, llm)
    finally:
        close = getattr(llm, "close", None)
        if close:
            close()
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
