"""Check judges against their labelled banks: per-label accuracy and confusion matrix of each.

    python -m scripts.judge_banks                          # every judge in conf/judge_bank/
    python -m scripts.judge_banks locomo_qa conflict_contradiction
    python -m scripts.judge_banks locomo_qa judge=local judge.llm.model=<gguf>   # another judge model
    python -m scripts.judge_banks halumem_update --per-label 40   # a fixed-seed sample of 40 cases per label
    python -m scripts.judge_banks --table                 # only rebuild results/tables/judges.md from the result files

Words without ``=`` (and not ``~key``) name judges (conf/judge_bank/<judge>.yaml); the others are Hydra overrides of
conf/judge_banks.yaml. The judge client is built by the project's one judge builder (eval.judge.judge_client:
``judge.llm``, else ``llm``) and each bank judge with ``hydra.utils.instantiate(cfg, llm=<client>)``. Each bank
(data/judge_banks/<judge>.jsonl) is checked first (known labels, >= min_cases_per_label per label), then
judged case by case. Writes results/bench/judge_banks/<judge>.json (every verdict, the command, the code) and
rebuilds results/tables/judges.md from every such file; a judge of conf/judge_bank/ with no such file is listed there
as not measured. ``--per-label N`` (the ``per_label`` key) judges a sample of N cases per label drawn with
``sample_seed``, the same cases on every rerun. Every LLM response is cached (the client's response cache under
``cache_dir``) as it arrives: a stopped run, rerun with the same arguments, pays only for the verdicts it had not got.
The result file is rewritten after every verdict (``complete`` false until the last; labels taken in turn), so a
stopped run's table shows what it judged, marked as stopped and not decided.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm import tqdm

from eval.judge import judge_client
from core.atomic import write_text_atomic
from eval.judge_bank import BankJudge, in_turn, judges_markdown, load_bank, sample_per_label, score_bank
from eval.provenance import code_label, code_version

CONF = REPO / "conf"


def available_judges() -> list[str]:
    return sorted(p.stem for p in (CONF / "judge_bank").glob("*.yaml"))


def compose_config(judge: str, overrides: list[str]) -> DictConfig:
    if judge not in available_judges():
        raise SystemExit(f"judge {judge!r}: no conf/judge_bank/{judge}.yaml (known: {', '.join(available_judges())})")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("judge_banks", overrides=[f"+judge_bank={judge}", *overrides])


def run_bank(name: str, cfg: DictConfig, llm: Any, command: str, save: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """One judge on its bank: the record written to results/bench/judge_banks/<name>.json; ``save`` gets the
    record after every verdict (``complete`` false until the last), so a stopped run leaves what it judged."""
    bank_path = Path(str(cfg.judge_bank.bank))
    judge = instantiate(cfg.judge_bank, llm=llm)
    if not isinstance(judge, BankJudge):
        raise SystemExit(f"conf/judge_bank/{name}.yaml: {type(judge).__name__} has no `labels` and `verdict` (eval.judge_bank.BankJudge)")
    bank = load_bank(bank_path, judge.labels, int(cfg.min_cases_per_label))
    per_label = None if cfg.per_label is None else int(cfg.per_label)
    cases = in_turn(sample_per_label(bank, judge.labels, per_label, int(cfg.sample_seed)), judge.labels)
    started = time.time()
    doc = (type(judge).__doc__ or "").strip().split("\n\n")[0]
    head = {
        "judge": name,
        "description": " ".join(doc.split()),
        "judge_class": f"{type(judge).__module__}.{type(judge).__name__}",
        "settings": getattr(judge, "settings", {}),
        "bank": str(bank_path),
        "bank_sha256": hashlib.sha256(bank_path.read_bytes()).hexdigest(),
        "bank_cases_per_label": {label: sum(c.label == label for c in bank) for label in judge.labels},
        "sample": None if per_label is None else {"per_label": per_label, "seed": int(cfg.sample_seed)},
        "cases_planned": len(cases),
        "companion": cfg.judge_bank.get("companion"),
        "judge_model_id": llm.model_id,
        "command": command,
        "code": code_label(code_version()),
    }

    def record(result: dict[str, Any]) -> dict[str, Any]:
        return {**head, "complete": result["n"] == len(cases), "wall_s": round(time.time() - started, 1),
                "finished_at": datetime.now(timezone.utc).isoformat(), "result": result}  # fmt: skip

    with tqdm(total=len(cases), desc=f"bank {name}", unit="case") as bar:
        def progress(result: dict[str, Any]) -> None:
            bar.update(1)
            save(record(result))

        result = score_bank(judge, cases, float(cfg.pass_accuracy), progress=progress, workers=int(cfg.workers))
    return record(result)


def print_summary(record: dict[str, Any]) -> None:
    result = record["result"]
    print(f"\n{record['judge']} ({record['judge_model_id']}): {result['n']} cases, {result['failed']} failed verdicts")
    columns = [*result["labels"], "failed"]
    width = max(len(c) for c in columns + ["bank \\ judge"]) + 2
    for label in result["labels"]:
        cell = result["per_label"][label]
        accuracy = "  n/a " if cell["accuracy"] is None else f"{cell['accuracy'] * 100:5.1f}%"
        print(f"  {label:{width}s} accuracy {accuracy} ({cell['correct']}/{cell['n']})")
    print("  " + "bank \\ judge".ljust(width) + "".join(c.rjust(width) for c in columns))
    for label in result["labels"]:
        print("  " + label.ljust(width) + "".join(str(result["confusion"][label][c]).rjust(width) for c in columns))
    print(f"  every label >= {result['pass_accuracy'] * 100:.0f}%: {'yes' if result['every_label_reaches_pass_accuracy'] else 'NO'}")


def write_table(out_dir: Path, table: Path) -> None:
    records = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(out_dir.glob("*.json"))}
    table.parent.mkdir(parents=True, exist_ok=True)
    unmeasured = {n: compose_config(n, []).judge_bank.get("companion") for n in available_judges() if n not in records}
    table.write_text(judges_markdown(records, unmeasured=unmeasured), encoding="utf-8")


def per_label_overrides(args: list[str]) -> list[str]:
    """``--per-label N`` / ``--per-label=N`` as the Hydra override ``per_label=N``; other words unchanged."""
    out, rest = [], iter(args)
    for arg in rest:
        if arg == "--per-label":
            value = next(rest, None)
            if value is None or not value.isdigit():
                raise SystemExit("--per-label needs a whole number of cases per label, e.g. --per-label 40")
            out.append(f"per_label={value}")
        elif arg.startswith("--per-label="):
            out.append(f"per_label={arg.split('=', 1)[1]}")
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    if "--table" in args:  # judges.md again from the result files (a stopped run's partial file included), no judge asked
        cfg = compose_config(available_judges()[0], [a for a in args if a != "--table"])
        write_table(Path(str(cfg.out_dir)), Path(str(cfg.table)))
        print(cfg.table)
        return 0
    words = per_label_overrides(args)
    overrides = [a for a in words if "=" in a or a.startswith("~")]  # Hydra overrides (`~key` deletes one)
    names = [a for a in words if a not in overrides] or available_judges()
    configs = {name: compose_config(name, overrides) for name in names}  # every bank config whole before any LLM starts
    first = configs[names[0]]
    llm = judge_client(first.judge, first.llm)  # one client for every bank
    command = " ".join(["python -m scripts.judge_banks", *args])
    out_dir = Path(str(first.out_dir))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, cfg in configs.items():
            path = out_dir / f"{name}.json"
            record = run_bank(name, cfg, llm, command, save=lambda r, path=path: write_text_atomic(path, json.dumps(r, indent=1) + "\n"))
            write_text_atomic(path, json.dumps(record, indent=1) + "\n")
            print_summary(record)
            write_table(out_dir, Path(str(first.table)))  # after each judge; a stopped judge's file holds what it judged
    finally:
        close = getattr(llm, "close", None)
        if close:
            close()
    print(f"\n{first.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
