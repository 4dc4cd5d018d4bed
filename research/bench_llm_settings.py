"""Local-LLM settings side by side: seconds per MOSAIC turn and tokens/s, settings alternated in one session.

Why: every experiment here is bound by the local model on 2 CPU cores, and machine noise (other jobs, thermal
state) is larger than most setting effects. Running the settings one after the other, round after round, in
the same session lets the noise cancel in the per-round ratios. Two modes:

* ``quickstart`` (the measure that matters to a user): a cold MOSAIC quickstart (``run.py experiment=locomo
  system=mosaic``, a fresh response cache and results folder each time) per setting and round; wall time, LLM
  seconds, seconds per ingested turn, prompt tokens read vs reused from the server's prefix cache, generated
  tokens/s, judge accuracy and F1, and every cold reply that differs between settings (same request, other text).
* ``extraction``: MOSAIC's extraction call on the first ``--turns`` turns of a dev session (LoCoMo conv-26,
  session 2) in a fresh server per setting and round: seconds per call, generated tokens/s, differing replies.
  Minutes instead of the quickstart's quarter hour: for choosing what the quickstart mode should compare.

A setting is ``NAME=OVERRIDES`` with space-separated Hydra overrides of ``llm.`` (``--setting
"slots6=llm.parallel=6"``) and ``system.extract.`` (``"rows=system.extract.output_format=rows"``), and in quickstart mode also of ``system.`` and ``run.`` (``"ahead=llm.parallel=2
system.extract.concurrent_calls=2 run.workers=2"``) and ``env:KEY=VALUE`` items for the process environment (``env:PYTHONPATH=DIR``
puts another build of xllamacpp first). The first setting is the reference of the ratios.

    python -m research.bench_llm_settings quickstart --rounds 2 --setting "base=" --setting "new=llm.parallel=6"

Results: ``results/bench/llm_settings_<mode>[_<tag>].json`` and ``.md`` (rows per setting and round, medians, ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = ["experiment=locomo", "system=mosaic", "logger=none"]


@dataclass
class Setting:
    """One server configuration: Hydra overrides of ``llm.`` and extra environment variables."""

    name: str
    overrides: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Setting:
        name, _, rest = text.partition("=")
        if not name or not _:
            raise SystemExit(f"--setting {text!r}: write NAME=OVERRIDES, e.g. 'slots6=llm.parallel=6' or 'base='")
        setting = cls(name)
        for item in shlex.split(rest):
            if item.startswith("env:"):
                key, _, value = item[4:].partition("=")
                setting.env[key] = value
            elif item.startswith(("llm.", "system.", "run.")):
                setting.overrides.append(item)
            else:
                raise SystemExit(f"--setting {text!r}: {item!r} is neither an llm.*, system.* or run.* override nor env:KEY=VALUE")
        return setting


def cache_replies(cache_file: Path) -> dict[str, str]:
    """Request key -> reply text of a response cache (remembered faults included, marked), read through the
    cache's own reader so an entry failing its checksum is left out as an export would leave it."""
    if not cache_file.exists():
        return {}
    from core.llm.cache import ResponseCache

    cache = ResponseCache(cache_file)
    try:
        rows = cache.items()
    finally:
        cache.close()
    replies = {}
    for key, value in rows:
        entry = json.loads(value)
        replies[key] = ("[fault] " if "output_fault" in entry else "") + str(entry.get("text", ""))
    return replies


def differing(reference: dict[str, str], other: dict[str, str]) -> dict[str, Any]:
    """Same request, other text: the replies a setting changed; plus requests only one side made (divergence)."""
    shared = reference.keys() & other.keys()
    changed = sorted(key for key in shared if reference[key] != other[key])
    return {"shared_requests": len(shared), "differing_replies": len(changed), "differing_keys": changed,
            "only_reference": len(reference.keys() - other.keys()), "only_this": len(other.keys() - reference.keys())}  # fmt: skip


def run_quickstart(setting: Setting, work: Path, python: str) -> dict[str, Any]:
    """One cold MOSAIC quickstart under ``setting`` in a fresh cache and results folder."""
    cache_dir, results_dir = work / "cache", work / "results"
    env = {**os.environ, **setting.env, "MOSAIC_CACHE_DIR": str(cache_dir), "WANDB_MODE": "offline"}
    command = [python, "run.py", *QUICKSTART, f"results_dir={results_dir}", *setting.overrides]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    (work / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 3):
        raise SystemExit(f"setting {setting.name}: run.py exited {done.returncode}; log: {work / 'run.log'}")
    metrics_path = Path(done.stdout.strip().splitlines()[-1])
    metrics = json.loads(metrics_path.read_text())
    meta, overall = metrics["metadata"], metrics["overall"]
    usage = meta["llm_usage"]
    by_purpose = usage.get("by_purpose", {})
    reused = sum(p.get("server_cached_prompt_tokens", 0) for p in by_purpose.values())
    latency = meta.get("llm_call_latency", {})
    turns = metrics.get("ingest", {}).get("n_turns") or 0
    ingest_s = sum(row.get("seconds", 0.0) for row in _rows(metrics_path.parent / "ingest_sessions.jsonl"))
    return {
        "wall_s": round(wall, 1), "run_wall_s": meta.get("wall_s_this_invocation"),
        "llm_s": round(latency.get("mean_s", 0.0) * latency.get("n", 0), 1), "calls": usage.get("calls"),
        "prompt_tokens": usage.get("prompt_tokens"), "prompt_tokens_reused": reused,
        "prompt_tokens_read": usage.get("prompt_tokens", 0) - reused, "completion_tokens": usage.get("completion_tokens"),
        "turns": turns, "ingest_s_per_turn": round(ingest_s / turns, 2) if turns and ingest_s else None,
        "judge": overall.get("judge"), "f1": overall.get("f1"), "exit": done.returncode,
        "metrics": str(metrics_path), "replies": cache_replies(cache_dir / "llm_cache.sqlite"),
    }  # fmt: skip


def _rows(path: Path) -> list[dict[str, Any]]:
    """A run folder's row file through the one tolerant reader; none when the file is absent."""
    from eval.rows import read_rows

    return read_rows(path) if path.exists() else []


def run_extraction(setting: Setting, work: Path, python: str, turns: int) -> dict[str, Any]:
    """MOSAIC's extraction call on ``turns`` dev turns in a fresh server process under ``setting``."""
    env = {**os.environ, **setting.env}
    out = work / "extraction.json"
    command = [python, "-m", "research.bench_llm_settings", "_extraction_worker", "--turns", str(turns), "--out", str(out), *setting.overrides]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    (work / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"setting {setting.name}: extraction worker exited {done.returncode}; log: {work / 'run.log'}")
    return json.loads(out.read_text())


def extractor_options(overrides: list[str]) -> dict[str, str]:
    """The ``system.extract.KEY=VALUE`` overrides of a setting as EntityExtractor keyword arguments (it converts types)."""
    return dict(o.removeprefix("system.extract.").split("=", 1) for o in overrides if o.startswith("system.extract."))


def extraction_worker(turns: int, out: Path, overrides: list[str]) -> None:
    """In a process of its own: start the local server as ``conf/llm/local.yaml`` + overrides, time the calls."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from core.api import Turn
    from eval.benchmarks.locomo import load_locomo
    from mosaic.extract import EntityExtractor

    llm_overrides = [o.removeprefix("llm.") for o in overrides if o.startswith("llm.")]
    cfg = OmegaConf.merge(OmegaConf.load(REPO / "conf/llm/local.yaml"), OmegaConf.from_dotlist(llm_overrides))
    cfg.cache_path = None
    llm = instantiate(cfg)
    conversation = load_locomo(REPO / "data/locomo10.json")[0]  # conv-26: a development conversation
    session = conversation.sessions[1]
    dev_turns = [Turn(t.turn_id, t.speaker, t.text, session.time_iso) for t in session.turns][: turns + 1]
    # the published llm_settings_extraction files were made with the extractor's code defaults of then (max_tokens 256;
    # context_chars does not matter, previous=None): kept so they reproduce; runs use conf (320)
    extractor = EntityExtractor(llm, **{"max_tokens": 256, **extractor_options(overrides)})
    llm.chat(extractor.messages(dev_turns[0], dev_turns[0].session_time, None), max_tokens=1, purpose="warm-up")  # reads the fixed prefix once
    started, completion, replies = time.perf_counter(), 0, {}
    for turn in dev_turns[1:]:
        result = llm.chat(extractor.messages(turn, turn.session_time, None), response_schema=extractor.schema,
                          max_tokens=extractor.max_tokens, purpose="extraction")  # fmt: skip
        completion += result.completion_tokens
        replies[turn.turn_id] = result.text
    wall = time.perf_counter() - started
    llm.close()
    out.write_text(json.dumps({"wall_s": round(wall, 2), "s_per_call": round(wall / max(1, len(replies)), 2),
                               "completion_tokens": completion, "generated_tokens_per_s": round(completion / wall, 2),
                               "replies": replies}))  # fmt: skip


def summarise(mode: str, settings: list[Setting], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per setting, per-round ratios to the first setting, and replies that differ from it."""
    reference = settings[0].name
    time_key = "wall_s"
    summary: dict[str, Any] = {}
    for setting in settings:
        mine = [r for r in rows if r["setting"] == setting.name]
        ratios = []
        for row in mine:
            ref = next(r for r in rows if r["setting"] == reference and r["round"] == row["round"])
            ratios.append(row[time_key] / ref[time_key])
        numeric = {k for row in mine for k, v in row.items() if isinstance(v, int | float) and k not in ("round", "exit")}
        summary[setting.name] = {
            "overrides": setting.overrides, "env": setting.env, "rounds": len(mine),
            **{f"median_{k}": statistics.median(r[k] for r in mine if r.get(k) is not None) for k in sorted(numeric) if any(r.get(k) is not None for r in mine)},
            f"{time_key}_ratio_to_{reference}_per_round": [round(x, 3) for x in ratios],
            "differing_from_reference": [r.get("differing") for r in mine],
        }  # fmt: skip
    return summary


def to_markdown(mode: str, summary: dict[str, Any], reference: str) -> str:
    columns = ["wall_s", "llm_s", "ingest_s_per_turn", "prompt_tokens_read", "prompt_tokens_reused", "completion_tokens",
               "generated_tokens_per_s", "s_per_call", "judge", "f1"]  # fmt: skip
    present = [c for c in columns if any(f"median_{c}" in s for s in summary.values())]
    lines = [f"# Local-LLM settings, {mode} (medians over rounds; ratio: wall time / {reference}'s in the same round)", "",
             "| setting | " + " | ".join(present) + " | ratio per round | differing replies per round |",
             "|---|" + "---|" * (len(present) + 2)]  # fmt: skip
    for name, row in summary.items():
        cells = [str(round(row[f"median_{c}"], 3)) if f"median_{c}" in row else "" for c in present]
        diffs = [("-" if d is None else f"{d['differing_replies']} of {d['shared_requests']}") for d in row["differing_from_reference"]]
        ratio_key = next(k for k in row if k.endswith("_per_round"))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {row[ratio_key]} | {diffs} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_extraction_worker":
        parser = argparse.ArgumentParser()
        parser.add_argument("--turns", type=int)
        parser.add_argument("--out", type=Path)
        args, overrides = parser.parse_known_args(argv[1:])
        extraction_worker(args.turns, args.out, overrides)
        return {}
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["quickstart", "extraction"])
    parser.add_argument("--setting", action="append", required=True, help="NAME=OVERRIDES (first: the reference)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--turns", type=int, default=6, help="extraction mode: turns of conv-26 session 2")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=REPO / "results/bench")
    parser.add_argument("--note", default="", help="free text stored with the result (e.g. what else ran)")
    parser.add_argument("--tag", default="", help="results file suffix: llm_settings_<mode>_<tag>.json (default: none, llm_settings_<mode>.json)")
    args = parser.parse_args(argv)
    settings = [Setting.parse(text) for text in args.setting]
    if len({s.name for s in settings}) != len(settings):
        raise SystemExit("--setting names must differ")
    if args.mode == "extraction" and any(not o.startswith(("llm.", "system.extract.")) for s in settings for o in s.overrides):
        raise SystemExit("extraction mode calls the extractor alone: only llm.* and system.extract.* overrides apply (others: quickstart mode)")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_llm_settings_"))
    rows: list[dict[str, Any]] = []
    for round_no in range(1, args.rounds + 1):
        for setting in settings:  # alternated: every round runs every setting once, in the same order
            folder = work / f"round{round_no}" / setting.name
            folder.mkdir(parents=True, exist_ok=True)
            print(f"round {round_no}, setting {setting.name} ...", flush=True)
            if args.mode == "quickstart":
                row = run_quickstart(setting, folder, sys.executable)
            else:
                row = run_extraction(setting, folder, sys.executable, args.turns)
            row.update(setting=setting.name, round=round_no)
            reference = next((r for r in rows if r["setting"] == settings[0].name and r["round"] == round_no), None)
            row["differing"] = None if reference is None or setting is settings[0] else differing(reference["replies"], row["replies"])
            print(f"  {json.dumps({k: v for k, v in row.items() if k not in ('replies', 'differing')})}", flush=True)
            rows.append(row)
    summary = summarise(args.mode, settings, rows)
    result = {"mode": args.mode, "summary": summary, "rows": [{k: v for k, v in r.items() if k != "replies"} for r in rows],
              "cpus": os.cpu_count(), "python": platform.python_version(), "note": args.note,
              "command": " ".join(["python -m research.bench_llm_settings", *map(shlex.quote, argv)]),
              "when": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"llm_settings_{args.mode}" + (f"_{args.tag}" if args.tag else "")
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2))
    (args.out / f"{stem}.md").write_text(to_markdown(args.mode, summary, settings[0].name))
    print(to_markdown(args.mode, summary, settings[0].name))
    return result


if __name__ == "__main__":
    main()
