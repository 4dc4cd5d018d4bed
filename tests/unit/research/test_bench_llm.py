"""research/bench_llm.py: prompt prompts are unique (no prefix cache can serve them) and rates are per token."""

from __future__ import annotations

import time

from tests.fakes import FakeLLM
from tests.script_loader import load_script


def test_measure_uses_fresh_prompts_and_reports_rates():
    module = load_script("bench_llm", package="research")

    def slow(messages, schema):
        time.sleep(0.01)
        return "1"

    llm = FakeLLM(slow)
    row = module.measure(llm, rounds=2, prompt_tokens=90, gen_tokens=8)
    firsts = [r["messages"][0]["content"].splitlines()[0] for r in llm.requests]
    assert len(set(firsts)) == len(firsts) == 4  # every call starts differently
    assert 0 < row["prompt_tokens_per_s"] < 10 / 0.01 * 1.01  # FakeLLM: 10 prompt tokens in >= 10 ms
    assert row["generation_tokens_per_s"] > 0 and len(row["generation_rounds"]) == 2


def test_depth_puts_one_shared_context_before_every_generation_ask():
    module = load_script("bench_llm", package="research")
    llm = FakeLLM(lambda messages, schema: "1")
    module.measure(llm, rounds=2, prompt_tokens=90, gen_tokens=8, depth=300)
    generation = [r["messages"][0]["content"] for r in llm.requests[2:]]  # after the two prompt-speed calls
    assert len(generation) == 3  # warm-up read of the context, then the two timed rounds
    context = generation[0].rsplit("\n", 1)[0]
    assert len(context) > 1000 and all(text.startswith(context) for text in generation)
    asks = [text[len(context):] for text in generation[1:]]
    assert len(set(asks)) == 2 and all("count from 1 to 500" in ask for ask in asks)
