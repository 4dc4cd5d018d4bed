"""The conflict check's LLM judgement (mosaic.conflict_judgement): each mode's prompt has a fixed prefix, and each
answer, with or without log-probabilities, is read as the score the detector compares with its threshold."""

from __future__ import annotations

import math

import pytest

from mosaic.conflict_judgement import (
    NLI_SYSTEM_PROMPT,
    REVISE_SYSTEM_PROMPT,
    SUPERSEDE_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    ask_judgement,
    batch_label_distributions,
    build_nli_batch_messages,
    build_nli_messages,
    digit_distribution,
    label_distribution,
)
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_batched_writes import FALSE, UNKNOWN, BatchLogprobLLM


def _first_token_llm(top: dict[str, float]) -> FakeLLM:
    """Generates the most likely token of ``top`` with ``top`` as its first token's log-probabilities."""
    llm = FakeLLM(lambda m, s: max(top, key=top.get))
    chat = llm.chat

    def with_logprobs(messages, **kwargs):
        result = chat(messages, **kwargs)
        result.logprobs = [{"token": result.text, "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top.items()]}]
        return result

    llm.chat = with_logprobs
    return llm


@pytest.mark.parametrize(("mode", "top", "system", "score", "pick", "read"), [
    ("nli", {"false": 0.6, "unknown": 0.3, "true": 0.1}, NLI_SYSTEM_PROMPT, 0.6, 1, "labels"),
    ("pick", {"2": 0.7, "0": 0.3}, SYSTEM_PROMPT, 0.7, 2, "digits"),
    ("revise", {"1": 0.2, "0": 0.8}, REVISE_SYSTEM_PROMPT, 0.2, 1, "digits"),
    ("supersede", {"yes": 0.75, "no": 0.25}, SUPERSEDE_SYSTEM_PROMPT, 0.75, 1, "p_yes"),
])  # fmt: skip
def test_each_mode_asks_one_one_token_call_and_reads_its_score(mode, top, system, score, pick, read):
    llm = _first_token_llm(top)
    got_score, got_pick, messages, _, seen = ask_judgement(llm, mode, ["fact a", "fact b"], "new", top_logprobs=5)
    assert got_score == pytest.approx(score) and got_pick == pick and list(seen) == [read]
    assert [(r["max_tokens"], r["top_logprobs"], r["purpose"]) for r in llm.requests] == [(1, 5, "conflict")]
    assert messages[0]["content"] == system and llm.requests[0]["messages"] == messages
    if mode == "supersede":  # a pair question: the nearest held fact alone
        assert "fact b" not in messages[-1]["content"]


def test_distributions_parse_logprobs_and_fall_back_to_text():
    lp = [{"token": "false", "top_logprobs": [{"token": "false", "logprob": math.log(0.6)}, {"token": "unknown", "logprob": math.log(0.2)},
                                             {"token": "True", "logprob": math.log(0.1)}, {"token": "maybe", "logprob": math.log(0.1)}]}]  # fmt: skip
    dist = label_distribution(lp, "false")
    assert dist["false"] == pytest.approx(0.6 / 0.9) and dist["true"] == pytest.approx(0.1 / 0.9)
    assert label_distribution(None, "unknown") == {"true": 0.0, "false": 0.0, "unknown": 1.0}
    assert digit_distribution(None, "2", 3) == {2: 1.0}
    assert digit_distribution(None, "9", 3) == {0: 1.0}  # out of range: treated as "none"


def test_prompt_prefix_is_shared_across_calls():
    a = build_nli_messages(["fact a"], "new a")
    b = build_nli_messages(["fact b", "fact c"], "new b")
    assert a[:-1] == b[:-1] and a[-1] != b[-1]


def test_labels_are_read_per_check_in_order_and_a_missing_line_is_unjudged():
    llm = BatchLogprobLLM([FALSE, UNKNOWN])
    result = llm.chat([{"role": "user", "content": "x"}], top_logprobs=5)
    first, second, third = batch_label_distributions(result.logprobs, result.text, 3)
    assert first["false"] == pytest.approx(0.9) and second["unknown"] == pytest.approx(0.8) and third is None
    no_logprobs = batch_label_distributions(None, "1. unknown\n2. false", 2)
    assert [max(d, key=d.get) for d in no_logprobs] == ["unknown", "false"]


def test_the_batched_prompt_has_a_fixed_prefix():
    a = build_nli_batch_messages([(["fact a"], "new a"), (["fact b"], "new b")])
    b = build_nli_batch_messages([(["fact c", "fact d"], "new c"), (["fact e"], "new e"), (["fact f"], "new f")])
    assert a[:-1] == b[:-1] and a[-1] != b[-1] and a[2]["content"].startswith("1. ")


def test_no_answer_position_of_the_batched_examples_always_holds_one_label():
    """The worked examples' answers, read back by the label reader, differ at the first position across
    examples: examples that all open on "false" teach the model to open on "false"."""
    messages = build_nli_batch_messages([(["fact a"], "new a"), (["fact b"], "new b")])
    answers = [m["content"] for m in messages[1:-1] if m["role"] == "assistant"]
    labels = [[max(d, key=d.get) for d in batch_label_distributions(None, a, a.count("\n") + 1)] for a in answers]
    assert len({first for first, *_ in labels}) > 1 and all(len(set(group)) > 1 for group in labels)
