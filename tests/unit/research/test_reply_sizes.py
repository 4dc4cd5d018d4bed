"""research/reply_sizes.py: the numbers behind the output guards' values, read from a cache archive."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from research.reply_sizes import reply_sizes


def _completion(content: str, finish: str, tokens: int) -> dict:
    return {"choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": tokens}}


def test_good_and_cut_off_replies_are_told_apart_per_kind(tmp_path: Path):
    archive = tmp_path / "a.jsonl.gz"
    entries = [
        _completion(json.dumps({"edges": [{"fact": "a"}] * 3}), "stop", 120),
        _completion(json.dumps({"edges": [{"fact": "b"}]}), "stop", 40),
        _completion('{"edges": [{"fact": "a"}, {"fact": "a"}, {"fa', "length", 2048),  # a loop cut off at the cap
        _completion(json.dumps({"extracted_entities": [{"name": "x"}] * 5}), "stop", 60),
        {"text": "an answer", "completion_tokens": 9},  # the harness client's own entry
    ]
    with gzip.open(archive, "wt") as out:
        for n, value in enumerate(entries):
            out.write(json.dumps({"key": f"k{n}", "value": value}) + "\n")
    sizes = reply_sizes(archive)
    assert sizes["kinds"]["edges"] == {"good": 2, "cut_off": 1, "max_completion_tokens": 120, "longest_list": 3}
    assert sizes["kinds"]["extracted_entities"]["longest_list"] == 5
    assert sizes["harness_entries"] == 1
