"""research/write_cost_replay: per-turn costs from a persisted cost log, and the two replay bounds."""

from __future__ import annotations

import base64
import json

import numpy as np

from research.write_cost_replay import replay


def _usage(extraction: int, conflict: int) -> dict:
    by = {"extraction": {"calls": extraction, "prompt_tokens": 100 * extraction, "completion_tokens": 10 * extraction}}
    if conflict:
        by["conflict"] = {"calls": conflict, "prompt_tokens": 50 * conflict, "completion_tokens": conflict}
    return {"usage": {"by_purpose": by}}


def test_replay_counts_costs_and_bounds(tmp_path):
    angles = [0.0, 0.1, 1.4]  # the second entity is near the first (cos 0.995); the third is far from both
    vectors = {f"e{i}": np.array([np.cos(a), np.sin(a), 0.0], dtype=np.float32) for i, a in enumerate(angles)}
    state = {
        "graph": {"entities": [{"entity_id": i, "subject": "Ana", "attribute": attr} for i, attr in zip(vectors, ["job", "job", "hobby"])],
                  "vectors": {i: base64.b64encode(v.tobytes()).decode() for i, v in vectors.items()}},
        "cost_log": [_usage(1, 0), _usage(1, 3), _usage(1, 1), _usage(1, 0)],
    }  # fmt: skip
    (tmp_path / "system" / "mosaic").mkdir(parents=True)
    (tmp_path / "system" / "mosaic" / "locomo_x.json").write_text(json.dumps({"state": state}))
    report = replay(tmp_path, radii=[0.5, 0.999])
    assert report["turns"] == 4 and report["calls_per_turn"]["total"] == 2.0  # (4 extraction + 4 conflict) / 4
    assert report["tokens_per_turn"]["conflict"] == (4 * 51) / 4
    assert report["batched_bound"] == {"conflict_calls_per_turn": 0.5, "total_calls_per_turn": 1.5}  # two turns judged once each
    assert report["judge_radius_bound"] == {"0.5": 0.5, "0.999": 1.0}  # the far entity only; then both
    assert report["same_slot_share"] == 0.5  # the second entity repeats the first one's slot; the third has its own
