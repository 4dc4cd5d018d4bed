"""Upper bound on what per-candidate blame costs the model judge, from published dev-suite runs (no model needed).

    python -m research.blame_cost

Before the fix an nli ``false`` blamed the nearest fact; now it asks one more one-token ``pick`` call over the same
facts when more than one is shown, and a numeric-rule hit no longer ends the check (the judge sees the remaining
candidates). So each nli hit adds at most one call of the pick prompt's size, and each numeric-rule hit at most one
nli call. The counts come from the published MOSAIC runs on the two development suites; the pick prompt's size
relative to the nli prompt is measured in characters on the same fact list.
"""

from __future__ import annotations

import json
from pathlib import Path

from mosaic.conflict_judgement import build_messages, build_nli_messages

RUNS = {"household_finance": "results/published/runs/conflict/mosaic/none/706c43483765",
        "workplace_policy": "results/published/runs/conflict/mosaic/none/7adeeb5b3235"}  # fmt: skip


def main() -> None:
    facts = ["A held fact of about ten words, as the suites state them."] * 6
    ratio = sum(len(m["content"]) for m in build_messages(facts, "x")) / sum(len(m["content"]) for m in build_nli_messages(facts, "x"))
    print(f"pick prompt / nli prompt, characters: {ratio:.3f}")
    for suite, folder in RUNS.items():
        metrics = json.loads((Path(folder) / "metrics.json").read_text(encoding="utf-8"))
        usage = metrics["metadata"]["llm_usage"]["by_purpose"]["conflict"]
        rows = [json.loads(line) for line in (Path(folder) / "cases.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
        nli = sum(e["reason"].startswith("LLM:") for r in rows for e in r["events"])
        numeric = sum(not e["reason"].startswith("LLM:") for r in rows for e in r["events"])
        misblamed = sum(e["reason"].startswith("LLM:") and r["conflict"] and not set(e["old_source_turn_ids"]) & set(r["conflicts_with"])
                        for r in rows for e in r["events"])  # fmt: skip
        per_call = usage["prompt_tokens"] / usage["calls"]
        print(f"{suite}: {len(rows)} probes, {usage['calls']} conflict calls ({usage['calls'] / len(rows):.2f} per probe, "
              f"{usage['prompt_tokens'] / len(rows):.0f} prompt tokens per probe); nli hits {nli} ({misblamed} on a conflicting "
              f"probe blamed a fact that is not its partner), numeric-rule hits {numeric}; added at most "
              f"{(nli + numeric) / len(rows):.2f} calls and {(nli * ratio + numeric) * per_call / len(rows):.0f} prompt tokens per probe")


if __name__ == "__main__":
    main()
