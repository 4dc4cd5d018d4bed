"""Run folders as eval.runner leaves them, written by hand for tests of the readers that pair finished runs
(scripts.compare_runs and each benchmark's compare module): only the files and fields those readers use, and the
``benchmark_target`` that names the benchmark class, as every metrics.json records it."""

from __future__ import annotations

import json

LOCOMO = "eval.benchmarks.locomo.LoCoMoBenchmark"
HALUMEM = "eval.benchmarks.halumem.benchmark.HaluMemBenchmark"
CONFLICT = "eval.benchmarks.conflict.ConflictBenchmark"


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_metrics(run, benchmark: str, target: str, **fields) -> None:
    (run / "metrics.json").write_text(json.dumps({"benchmark": benchmark, **fields, "metadata": {"git_sha": "abc", "benchmark_target": target}}))


def locomo_run(tmp_path, name, correct, calls=10, turns=5, seconds=(2.0, 3.0), cached=0):
    run = tmp_path / name
    run.mkdir()
    write_metrics(run, "locomo", LOCOMO)
    keys = [f"conv-x:q{i}" for i in range(len(correct))]
    write_rows(run / "predictions.jsonl", [{"key": k, "category": 1 + i % 2, "prediction": "red bike" if c else "blue car", "gold": "red bike"}
                                       for i, (k, c) in enumerate(zip(keys, correct))])  # fmt: skip
    write_rows(run / "judgements.jsonl", [{"key": k, "correct": bool(c)} for k, c in zip(keys, correct)])
    usage = {"calls": calls, "prompt_tokens": 900, "completion_tokens": 100, "cached_calls": cached,
             "by_purpose": {"extraction": {"calls": turns, "prompt_tokens": 400, "completion_tokens": 100},
                            "conflict": {"calls": calls - turns, "prompt_tokens": 500, "completion_tokens": 0}}}  # fmt: skip
    write_rows(run / "ingest.jsonl", [{"key": "conv-x", "n_turns": turns, "usage_reported": usage, "usage_metered": usage,
                                   "add_latency_s": list(seconds)}])  # fmt: skip
    return run


def locomo_clustered_run(tmp_path, name, correct_by_conversation, retrieved_text="one two three"):
    """A LoCoMo run over several conversations, 20 questions each; ``correct_by_conversation``: 0/1 per conversation."""
    run = tmp_path / name
    run.mkdir()
    write_metrics(run, "locomo", LOCOMO)
    rows, verdicts = [], []
    for c, correct in enumerate(correct_by_conversation):
        for q in range(20):
            key = f"conv-{c}:q{q}"
            rows.append({"key": key, "sample_id": f"conv-{c}", "category": 1, "prediction": "x", "gold": "y",
                         "retrieved": [{"text": retrieved_text, "source_turn_ids": []}]})  # fmt: skip
            verdicts.append({"key": key, "correct": bool(correct)})
    write_rows(run / "predictions.jsonl", rows)
    write_rows(run / "judgements.jsonl", verdicts)
    write_rows(run / "ingest.jsonl", [{"key": "conv-0", "n_turns": 1, "usage_reported": {}, "usage_metered": {}, "add_latency_s": [1.0]}])
    return run


def halumem_run(tmp_path, name, qa_labels, update_labels, calls_per_session=(4, 6)):
    """A HaluMem run folder as the runner (or publishing) leaves it: QA and update rows keyed uuid:session:index."""
    run = tmp_path / name
    run.mkdir()
    write_metrics(run, "halumem", HALUMEM)
    write_rows(run / "halumem_qa.jsonl", [{"key": f"u:{i % 2}:q{i}", "uuid": "u", "session": i % 2, "label": label}
                                      for i, label in enumerate(qa_labels)])  # fmt: skip
    write_rows(run / "halumem_updates.jsonl", [{"key": f"u:{i % 2}:{i}", "uuid": "u", "session": i % 2, "label": label}
                                           for i, label in enumerate(update_labels)])  # fmt: skip
    write_rows(run / "halumem_sessions.jsonl", [{"key": f"u:{s}", "n_turns": 2, "usage": {"calls": c, "prompt_tokens": 10 * c, "completion_tokens": c}}
                                            for s, c in enumerate(calls_per_session)])  # fmt: skip
    return run


def writes_only_run(tmp_path, name, outcomes_by_session, alarms_by_session, non_update=(10, 20), alarmed_points=None):
    """A writes-only HaluMem run (benchmark.score_qa=false): update-link rows only, one per session; with
    ``alarmed_points``, the rows count the alarmed points too (runs made before that have events only)."""
    run = tmp_path / name
    run.mkdir()
    write_metrics(run, "halumem", HALUMEM)
    write_rows(run / "halumem_update_links.jsonl", [
        {"key": f"u:{s}", "uuid": "u", "session": s, "non_update_points": n, "false_alarms": a, "events": a,
         "false_alarm_verdicts": {}, "unmatched_events": 0,
         **({"false_alarm_points": alarmed_points[s]} if alarmed_points else {}),
         "points": [{"index": i, "outcome": o, "targets_held": 1, "events": 0, "verdicts": []} for i, o in enumerate(outcomes)]}
        for s, (outcomes, a, n) in enumerate(zip(outcomes_by_session, alarms_by_session, non_update))])  # fmt: skip
    write_rows(run / "halumem_sessions.jsonl", [{"key": f"u:{s}", "n_turns": 2, "usage": {"calls": 1}} for s in range(len(non_update))])
    return run


def conflict_run(tmp_path, name, hits):
    """A conflict-suite run: two conflicting probes (detected strictly by ``hits[0]``, ``hits[1]``) and one that is not
    (a false alarm, leniently, by ``hits[2]``)."""
    run = tmp_path / name
    run.mkdir()
    write_metrics(run, "conflict", CONFLICT, llm_calls_per_case={"mean": 2.0})
    write_rows(run / "cases.jsonl", [
        {"id": "c1", "conflict": True, "type": "numeric", "detected_strict": hits[0], "detected_lenient": hits[0], "llm_calls": 2,
         "llm_calls_by_purpose": {"extraction": 1, "conflict": 1}, "seconds": 1.0},
        {"id": "c2", "conflict": True, "type": "logical", "detected_strict": hits[1], "detected_lenient": hits[1], "llm_calls": 1,
         "llm_calls_by_purpose": {"extraction": 1}, "seconds": 1.0},
        {"id": "n1", "conflict": False, "detected_strict": False, "detected_lenient": hits[2], "llm_calls": 1,
         "llm_calls_by_purpose": {"extraction": 1}, "seconds": 1.0},
    ])  # fmt: skip
    return run
