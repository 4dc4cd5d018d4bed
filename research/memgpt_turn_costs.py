"""MemGPT's prefix reuse and seconds per turn against the turn index, from a run's own record; a figure.

    python -m research.memgpt_turn_costs <run folder> --out results/bench/memgpt_turn_costs_<name>

Reads ``<run>/system/turn_costs.jsonl`` (one line per ingested turn, written as it finishes by the MemGPT
adapter: seconds, the model's prompt tokens, how many of them llama.cpp's prefix cache covered
(``server_cached_prompt_tokens``), completion tokens) and writes ``<out>.png`` (top: the share of each turn's
prompt the server reused; bottom: seconds per turn and what its new tokens predict), ``<out>.json`` and
``<out>.md``.

Why the fit: each Letta step re-sends the agent's whole history, so a turn's prompt grows with the turn index.
If the prefix cache carries the history, a turn costs what it adds (its uncached prompt tokens, read once) and
what it writes (completion tokens), and the seconds should not grow with the index beyond that. The report fits
``seconds = a + b * new prompt tokens + c * completion tokens`` over the turns the model answered and gives the
slope of seconds against the turn index before and after the fit (the residual's slope is what the new tokens do
not explain: longer attention over a longer context, or a busier machine). Reads the folder only; no LLM.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from core.atomic import write_json_atomic


def turns_of(run_dir: Path) -> list[dict[str, Any]]:
    """The first record of each turn (a resumed run's replays come later), in ingest order, 1-based index."""
    path = run_dir / "system" / "turn_costs.jsonl"
    if not path.exists():
        raise SystemExit(f"{path} not found: give a MemGPT run folder (results/.../memgpt/<ablation>/<run id>)")
    seen: set[tuple[str, str]] = set()
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        key = (record["namespace"], record["turn_id"])
        if key in seen:
            continue
        seen.add(key)
        prompt, cached = int(record.get("prompt_tokens", 0)), int(record.get("server_cached_prompt_tokens", 0))
        rows.append({"turn_index": len(rows) + 1, "turn_id": record["turn_id"], "seconds": float(record["seconds"]),
                     "model_replies": int(record.get("model_replies", 0)), "cache_replies": int(record.get("cache_replies", 0)),
                     "prompt_tokens": prompt, "server_cached_prompt_tokens": cached, "new_prompt_tokens": prompt - cached,
                     "completion_tokens": int(record["usage"].get("completion_tokens", 0)),
                     "prefix_reuse": round(cached / prompt, 4) if prompt else None,
                     "prompt_messages": record.get("prompt_messages")})
    return rows


def slope(x: np.ndarray, y: np.ndarray) -> float | None:
    return float(np.polyfit(x, y, 1)[0]) if len(x) >= 2 else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [r for r in rows if r["model_replies"] > 0]
    prompt = sum(r["prompt_tokens"] for r in answered)
    cached = sum(r["server_cached_prompt_tokens"] for r in answered)
    warm = answered[1:]  # after the first, cold prompt: what the prefix cache does turn after turn
    summary: dict[str, Any] = {
        "turns": len(rows), "turns_answered_by_the_model": len(answered),
        "turns_answered_from_the_response_cache": sum(r["cache_replies"] > 0 and r["model_replies"] == 0 for r in rows),
        "prompt_tokens": prompt, "server_cached_prompt_tokens": cached, "prefix_reuse": round(cached / prompt, 4) if prompt else None,
        "prefix_reuse_after_the_first_turn": (round(sum(r["server_cached_prompt_tokens"] for r in warm) / sum(r["prompt_tokens"] for r in warm), 4)
                                              if warm and sum(r["prompt_tokens"] for r in warm) else None),
        "seconds": round(sum(r["seconds"] for r in rows), 1),
    }
    if len(answered) >= 4:
        x = np.array([r["turn_index"] for r in answered], dtype=float)
        y = np.array([r["seconds"] for r in answered])
        design = np.column_stack([np.ones_like(x), [r["new_prompt_tokens"] for r in answered], [r["completion_tokens"] for r in answered]])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        predicted = design @ coef
        for row, value in zip(answered, predicted):
            row["seconds_predicted_by_new_tokens"] = round(float(value), 2)
        summary["fit"] = {"intercept_s": round(float(coef[0]), 3), "s_per_new_prompt_token": round(float(coef[1]), 5),
                          "s_per_completion_token": round(float(coef[2]), 4),
                          "seconds_slope_per_turn": round(slope(x, y) or 0.0, 3),
                          "residual_slope_per_turn": round(slope(x, y - predicted) or 0.0, 3),
                          "mean_seconds": round(float(y.mean()), 2)}
    return summary


def figure(rows: list[dict[str, Any]], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    answered = [r for r in rows if r["model_replies"] > 0]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    index = [r["turn_index"] for r in answered]
    top.bar(index, [100 * (r["prefix_reuse"] or 0) for r in answered], color="tab:blue")
    top.axhline(80, color="grey", linestyle=":", label="80%")
    top.set_ylabel("prompt reused from\nthe server's prefix cache (%)")
    top.set_ylim(0, 100)
    top.legend(loc="lower right")
    bottom.plot(index, [r["seconds"] for r in answered], "o-", label="seconds (measured)")
    if answered and "seconds_predicted_by_new_tokens" in answered[0]:
        bottom.plot(index, [r["seconds_predicted_by_new_tokens"] for r in answered], "x--", label="a + b·new prompt tokens + c·completion tokens")
    bottom.set_ylabel("seconds per turn")
    bottom.set_xlabel("turn index (ingest order)")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    twin = bottom.twinx()
    twin.plot(index, [r["prompt_tokens"] for r in answered], color="tab:grey", alpha=0.5, label="prompt tokens")
    twin.set_ylabel("prompt tokens", color="tab:grey")
    bottom.legend(loc="upper left", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def percent(share: float | None) -> str:
    return "" if share is None else f"{100 * share:.1f}%"


def markdown(report: dict[str, Any]) -> str:
    s, fit = report["summary"], report["summary"].get("fit") or {}
    lines = [f"# MemGPT prefix reuse and seconds per turn: {report['run']}", "", f"    {report['command']}", "",
             f"- turns {s['turns']} (model {s['turns_answered_by_the_model']}, response cache {s['turns_answered_from_the_response_cache']});"
             f" wall seconds over the turns {s['seconds']}",
             f"- prompt tokens {s['prompt_tokens']}, from the server's prefix cache {s['server_cached_prompt_tokens']}:"
             f" {100 * (s['prefix_reuse'] or 0):.1f}% (after the first turn {100 * (s['prefix_reuse_after_the_first_turn'] or 0):.1f}%)"]
    if fit:
        lines.append(f"- fit: seconds = {fit['intercept_s']} + {fit['s_per_new_prompt_token']}·new prompt tokens +"
                     f" {fit['s_per_completion_token']}·completion tokens; slope of seconds on the turn index"
                     f" {fit['seconds_slope_per_turn']} s/turn, of what the fit leaves {fit['residual_slope_per_turn']} s/turn"
                     f" (mean {fit['mean_seconds']} s/turn)")
    lines += ["", "| turn | id | seconds | prompt tokens | prefix-cached | reused | new | completion | messages |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['turn_index']} | {r['turn_id']} | {r['seconds']:.1f} | {r['prompt_tokens']} | {r['server_cached_prompt_tokens']} |"
              f" {percent(r['prefix_reuse'])} | {r['new_prompt_tokens']} | {r['completion_tokens']} | {r['prompt_messages']} |"
              for r in report["per_turn"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="path without suffix: writes .png, .json and .md")
    args = parser.parse_args(argv)
    rows = turns_of(args.run_dir)
    report = {"run": args.run_dir.name, "command": f"python -m research.memgpt_turn_costs {args.run_dir} --out {args.out}",
              "summary": summarise(rows), "per_turn": rows}
    figure(rows, f"MemGPT (Letta) run {args.run_dir.name}: prefix reuse and seconds per turn", args.out.with_suffix(".png"))
    write_json_atomic(args.out.with_suffix(".json"), report, indent=1)
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
