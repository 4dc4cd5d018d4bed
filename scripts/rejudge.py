"""Re-judge a finished LoCoMo run with a second judge and measure agreement with its first judge.

    python -m scripts.rejudge run_dir=results/runs/locomo/rag/none/<hash> judge2/prompt=strict
    python -m scripts.rejudge run_dir=... judge2=local judge2.llm.model=<gguf> judge2/prompt=mem0_generous
    python -m scripts.rejudge run_dir=... judge2=calibrated section=judge_calibrated   # Table 1's calibrated column

`judge2` takes any judge config (conf/judge/*.yaml) and prompt (conf/judge/prompt/*.yaml), built by the
project's one judge builder (eval.judge.build_judge: its max_tokens, attempts, threshold... are all used);
settings in conf/rejudge.yaml. Writes <run_dir>/judgements2__<model>__<prompt>.jsonl and a `judge2` section
(or the one `section=` names) in <run_dir>/metrics.json: accuracy (overall, per category, both gold columns), Cohen's kappa and the
confusion table against the run's own judge. Cached LLM responses make a rerun free.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from core.api import HarnessError
from eval.judge import build_judge
from eval.benchmarks.locomo.judge_agreement import check_rejudgeable, rejudge
from eval.run_lock import RunLock


def _as_group_override(override: str) -> str:
    """Hydra's spelling of a group placed at package judge2: `judge@judge2=X`, `judge/prompt@judge2.prompt=Y`."""
    if override.startswith("judge2="):
        return "judge@judge2" + override[len("judge2") :]
    if override.startswith("judge2/prompt="):
        return "judge/prompt@judge2.prompt" + override[len("judge2/prompt") :]
    return override


def compose_config(overrides: list[str]) -> DictConfig:
    """`judge2=X` and `judge2/prompt=Y` select conf/judge/X.yaml and conf/judge/prompt/Y.yaml for the second judge."""
    translated = [_as_group_override(o) for o in overrides]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("rejudge", overrides=translated)


def main(argv: list[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__)
        return 0
    cfg = compose_config(overrides)
    try:  # the folder first: a missing or damaged one is one line, before any judge server starts
        check_rejudgeable(Path(cfg.run_dir))
        with RunLock(Path(cfg.run_dir)):  # the run itself, or another rejudge, must not write the folder meanwhile
            return _rejudge_locked(cfg)
    except HarnessError as err:
        print(f"error ({type(err).__name__}): {' '.join(str(err).split())}", file=sys.stderr)
        return 2


def _rejudge_locked(cfg: DictConfig) -> int:
    judge = build_judge(cfg.judge2, cfg.llm, where="judge2")  # the one judge builder: judge2's class, client, prompt and settings
    llm = judge.llm
    try:
        section = rejudge(Path(cfg.run_dir), judge, llm.model_id, int(cfg.bootstrap_samples), int(cfg.seed), str(cfg.section))
    finally:
        close = getattr(llm, "close", None)
        if close:
            close()
    overall = section["overall"]["judge"]
    print(f"judge2 {section['judge_model_id']} ({section['prompt']}): accuracy {overall['mean']} n={overall['n']}; "
          f"kappa {section['kappa']}; agreement {section['agreement']}; confusion {section['confusion']}")
    print(Path(cfg.run_dir) / "metrics.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
