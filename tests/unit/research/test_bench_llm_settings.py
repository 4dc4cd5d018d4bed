"""research/bench_llm_settings.py: settings parse, alternate by round, and differing replies are counted."""

from __future__ import annotations

import json
import sqlite3

import pytest

from research import bench_llm_settings as bench


def test_a_setting_splits_llm_overrides_from_environment():
    setting = bench.Setting.parse("spec=llm.speculative=draft llm.draft_model=qwen2.5-coder-0.5b-instruct env:PYTHONPATH=/opt/native")
    assert setting.name == "spec"
    assert setting.overrides == ["llm.speculative=draft", "llm.draft_model=qwen2.5-coder-0.5b-instruct"]
    assert setting.env == {"PYTHONPATH": "/opt/native"}
    assert bench.Setting.parse("base=").overrides == []
    ahead = bench.Setting.parse("ahead=system.extract.concurrent_calls=2 run.workers=2")
    assert ahead.overrides == ["system.extract.concurrent_calls=2", "run.workers=2"]  # quickstart mode passes them to run.py
    with pytest.raises(SystemExit, match="neither an llm"):
        bench.Setting.parse("bad=benchmark.k=3")
    with pytest.raises(SystemExit, match="only llm.\\* and system.extract.\\* overrides apply"):
        bench.main(["extraction", "--setting", "base=", "--setting", "ahead=run.workers=2"])


def test_differing_replies_are_same_request_other_text():
    reference = {"a": "x", "b": "y", "c": "z"}
    other = {"a": "x", "b": "Y", "d": "w"}
    found = bench.differing(reference, other)
    assert found["shared_requests"] == 2 and found["differing_replies"] == 1 and found["differing_keys"] == ["b"]
    assert found["only_reference"] == 1 and found["only_this"] == 1


def test_cache_replies_reads_texts_and_marks_faults(tmp_path):
    db = tmp_path / "llm_cache.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO responses VALUES ('k1', ?)", (json.dumps({"text": "hello"}),))
        conn.execute("INSERT INTO responses VALUES ('k2', ?)", (json.dumps({"text": "loop", "output_fault": "cut off"}),))
    assert bench.cache_replies(db) == {"k1": "hello", "k2": "[fault] loop"}
    assert bench.cache_replies(tmp_path / "absent.sqlite") == {}


def test_ratios_are_taken_within_each_round(monkeypatch, tmp_path):
    walls = {("base", 1): 100.0, ("new", 1): 50.0, ("base", 2): 200.0, ("new", 2): 120.0}
    order = []

    def fake_run(setting, work, python, turns):
        round_no = int(work.parent.name.removeprefix("round"))
        order.append((setting.name, round_no))
        return {"wall_s": walls[(setting.name, round_no)], "replies": {"q": "same" if setting.name == "base" else "other"}}

    monkeypatch.setattr(bench, "run_extraction", fake_run)
    result = bench.main(["extraction", "--rounds", "2", "--setting", "base=", "--setting", "new=llm.parallel=6",
                         "--work", str(tmp_path / "w"), "--out", str(tmp_path / "out")])  # fmt: skip
    assert order == [("base", 1), ("new", 1), ("base", 2), ("new", 2)]  # alternated, round by round
    new = result["summary"]["new"]
    assert new["wall_s_ratio_to_base_per_round"] == [0.5, 0.6]
    assert [d["differing_replies"] for d in new["differing_from_reference"]] == [1, 1]
    assert (tmp_path / "out" / "llm_settings_extraction.md").read_text().count("| new |") == 1
    bench.main(["extraction", "--rounds", "1", "--setting", "base=", "--setting", "new=llm.parallel=6", "--tag", "rows",
                "--work", str(tmp_path / "w2"), "--out", str(tmp_path / "out")])  # fmt: skip
    assert (tmp_path / "out" / "llm_settings_extraction_rows.json").exists()  # a tag keeps earlier results


def test_extraction_mode_hands_system_extract_overrides_to_the_extractor():
    overrides = ["llm.parallel=4", "system.extract.output_format=rows", "system.extract.max_entities=5"]
    assert bench.extractor_options(overrides) == {"output_format": "rows", "max_entities": "5"}
    assert bench.extractor_options(["llm.parallel=4"]) == {}
