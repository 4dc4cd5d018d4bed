"""research.memgpt_turn_costs: per-turn prefix reuse from a MemGPT run's turn_costs.jsonl, and the fit that says
whether seconds grow with the turn index beyond what each turn's new tokens explain."""

from __future__ import annotations

import json
from pathlib import Path

from research.memgpt_turn_costs import main, summarise, turns_of


def _write(run_dir: Path, rows: list[dict]) -> None:
    (run_dir / "system").mkdir(parents=True)
    (run_dir / "system" / "turn_costs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _row(turn_id: str, seconds: float, prompt: int, cached: int, completion: int, model: int = 1) -> dict:
    return {"namespace": "locomo:conv-26", "turn_id": turn_id, "seconds": seconds, "usage": {"calls": model, "completion_tokens": completion},
            "model_replies": model, "cache_replies": 1 - model, "prompt_tokens": prompt, "server_cached_prompt_tokens": cached, "prompt_messages": 5}


def test_reuse_share_and_a_replayed_turn_kept_once(tmp_path):
    _write(tmp_path, [_row("D1:1", 10.0, 2000, 0, 50), _row("D1:2", 5.0, 2200, 2000, 60), _row("D1:2", 0.1, 0, 0, 0, model=0)])
    rows = turns_of(tmp_path)
    assert [r["turn_id"] for r in rows] == ["D1:1", "D1:2"]  # the resumed run's replay of D1:2 is not a new turn
    summary = summarise(rows)
    assert summary["prefix_reuse"] == round(2000 / 4200, 4) and summary["prefix_reuse_after_the_first_turn"] == round(2000 / 2200, 4)


def test_seconds_explained_by_new_tokens_leave_no_residual_slope(tmp_path):
    # seconds = 1 + 0.01 per new prompt token + 0.1 per completion token, while the prompt grows every turn
    rows = []
    for i in range(8):
        new, completion = 200 + 30 * (i % 3), 40 + 20 * (i % 2)
        rows.append(_row(f"D1:{i + 1}", 1 + 0.01 * new + 0.1 * completion, 2000 + 200 * i, 2000 + 200 * i - new, completion))
    _write(tmp_path, rows)
    fit = summarise(turns_of(tmp_path))["fit"]
    assert abs(fit["s_per_new_prompt_token"] - 0.01) < 1e-6 and abs(fit["s_per_completion_token"] - 0.1) < 1e-6
    assert abs(fit["residual_slope_per_turn"]) < 1e-6


def test_seconds_growing_with_the_index_show_in_the_residual(tmp_path):
    _write(tmp_path, [_row(f"D1:{i + 1}", 5.0 + 2.0 * i + (i % 2), 2000 + 200 * i, 1800 + 200 * i, 50 + 10 * (i % 3)) for i in range(8)])
    assert summarise(turns_of(tmp_path))["fit"]["residual_slope_per_turn"] > 1.5


def test_main_writes_figure_json_and_markdown(tmp_path):
    run = tmp_path / "run"
    _write(run, [_row(f"D1:{i + 1}", 5.0 + i, 2000 + 200 * i, 1800 + 200 * i if i else 0, 50 + 7 * i) for i in range(5)])
    main([str(run), "--out", str(tmp_path / "out")])
    assert (tmp_path / "out.png").stat().st_size > 0 and json.loads((tmp_path / "out.json").read_text())["summary"]["turns"] == 5
    assert "| 2 | D1:2 |" in (tmp_path / "out.md").read_text()
