"""Check judges against their labelled banks: per-label accuracy and confusion matrix of each.

    python -m scripts.judge_banks                          # every judge in conf/judge_bank/
    python -m scripts.judge_banks locomo_qa conflict_contradiction
    python -m scripts.judge_banks locomo_qa judge=local judge.llm.model=<gguf>   # another judge model

Words without ``=`` (and not ``~key``) name judges (conf/judge_bank/<judge>.yaml); the others are Hydra overrides of
conf/judge_banks.yaml. The judge client is built by the project's one judge builder (eval.judge.judge_client:
``judge.llm``, else ``llm``) and each bank judge with ``hydra.utils.instantiate(cfg, llm=<client>)``. Each bank
(data/judge_banks/<judge>.jsonl) is checked first (known labels, >= min_cases_per_label per label), then
judged case by case. Writes results/bench/judge_banks/<judge>.json (every verdict, the command, the code) and
rebuilds results/tables/judges.md from every such file. LLM responses are cached: a rerun is free.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm import tqdm

from eval.judge import judge_client
from eval.judge_bank import BankJudge, judges_markdown, load_bank, score_bank
from eval.provenance import code_label, code_version

CONF = REPO / "conf"


def available_judges() -> list[str]:
    return sorted(p.stem for p in (CONF / "judge_bank").glob("*.yaml"))


def compose_config(judge: str, overrides: list[str]) -> DictConfig:
    if judge not in available_judges():
        raise SystemExit(f"judge {judge!r}: no conf/judge_bank/{judge}.yaml (known: {', '.join(available_judges())})")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("judge_banks", overrides=[f"+judge_bank={judge}", *overrides])


def run_bank(name: str, cfg: DictConfig, llm: Any, command: str) -> dict[str, Any]:
    """One judge on its bank: the record written to results/bench/judge_banks/<name>.json."""
    bank_path = Path(str(cfg.judge_bank.bank))
    judge = instantiate(cfg.judge_bank, llm=llm)
    if not isinstance(judge, BankJudge):
        raise SystemExit(f"conf/judge_bank/{name}.yaml: {type(judge).__name__} has no `labels` and `verdict` (eval.judge_bank.BankJudge)")
    cases = load_bank(bank_path, judge.labels, int(cfg.min_cases_per_label))
    started = time.time()
    with tqdm(total=len(cases), desc=f"bank {name}", unit="case") as bar:
        result = score_bank(judge, cases, float(cfg.pass_accuracy), progress=lambda: bar.update(1), workers=int(cfg.workers))
    doc = (type(judge).__doc__ or "").strip().split("\n\n")[0]
    return {
        "judge": name,
        "description": " ".join(doc.split()),
        "judge_class": f"{type(judge).__module__}.{type(judge).__name__}",
        "settings": getattr(judge, "settings", {}),
        "bank": str(bank_path),
        "bank_sha256": hashlib.sha256(bank_path.read_bytes()).hexdigest(),
        "judge_model_id": llm.model_id,
        "command": command,
        "code": code_label(code_version()),
        "wall_s": round(time.time() - started, 1),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "result": result,
    }


def print_summary(record: dict[str, Any]) -> None:
    result = record["result"]
    print(f"\n{record['judge']} ({record['judge_model_id']}): {result['n']} cases, {result['failed']} failed verdicts")
    columns = [*result["labels"], "failed"]
    width = max(len(c) for c in columns + ["bank \\ judge"]) + 2
    for label in result["labels"]:
        cell = result["per_label"][label]
        print(f"  {label:{width}s} accuracy {cell['accuracy'] * 100:5.1f}% ({cell['correct']}/{cell['n']})")
    print("  " + "bank \\ judge".ljust(width) + "".join(c.rjust(width) for c in columns))
    for label in result["labels"]:
        print("  " + label.ljust(width) + "".join(str(result["confusion"][label][c]).rjust(width) for c in columns))
    print(f"  every label >= {result['pass_accuracy'] * 100:.0f}%: {'yes' if result['every_label_reaches_pass_accuracy'] else 'NO'}")


def write_table(out_dir: Path, table: Path) -> None:
    records = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(out_dir.glob("*.json"))}
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(judges_markdown(records), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    overrides = [a for a in args if "=" in a or a.startswith("~")]  # Hydra overrides (`~key` deletes one)
    names = [a for a in args if a not in overrides] or available_judges()
    configs = {name: compose_config(name, overrides) for name in names}  # every bank config whole before any LLM starts
    first = configs[names[0]]
    llm = judge_client(first.judge, first.llm)  # one client for every bank
    command = " ".join(["python -m scripts.judge_banks", *args])
    out_dir = Path(str(first.out_dir))
    try:
        for name, cfg in configs.items():
            record = run_bank(name, cfg, llm, command)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            print_summary(record)
            write_table(out_dir, Path(str(first.table)))  # after each judge: a stopped command keeps what it finished
    finally:
        close = getattr(llm, "close", None)
        if close:
            close()
    print(f"\n{first.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
