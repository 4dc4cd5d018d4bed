"""Re-judge a finished LoCoMo run with a second judge and measure agreement with its first judge.

    python -m scripts.rejudge run_dir=results/runs/locomo/rag/none/<hash> judge2/prompt=strict
    python -m scripts.rejudge run_dir=... judge2=local judge2.llm.model=<gguf> judge2/prompt=mem0_generous

`judge2` takes any judge config (conf/judge/*.yaml) and prompt (conf/judge/prompt/*.yaml); settings in
conf/rejudge.yaml. Writes <run_dir>/judgements2__<model>__<prompt>.jsonl and a `judge2` section in
<run_dir>/metrics.json: accuracy (overall, per category, both gold columns), Cohen's kappa and the
confusion table against the run's own judge. Cached LLM responses make a rerun free.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from core.api import HarnessError
from eval.judge import JudgePrompt, LLMJudge
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
    llm = instantiate(cfg.judge2.llm) if cfg.judge2.get("llm") else instantiate(cfg.llm)
    prompt = JudgePrompt.from_mapping(OmegaConf.to_container(cfg.judge2.prompt, resolve=True), "judge2.prompt")  # type: ignore[arg-type]
    try:
        section = rejudge(Path(cfg.run_dir), LLMJudge(llm, max_tokens=int(cfg.judge_max_tokens), prompt=prompt), llm.model_id, int(cfg.bootstrap_samples), int(cfg.seed))
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
