"""How many tokens the paper's full tables need, and how long one GPU serving them with vLLM would take (a projection).

    python -m research.gpu_projection [--out results/bench/gpu_projection.md]

Measured part: the prompt and completion tokens each system sent per ingested turn and per question (answer + judge)
in the published local-model runs on development data (LoCoMo conv-26, the household_finance conflict suite;
metrics.json ``llm_usage``, or ``ingest_cost.json`` of an unfinished run where no finished one wrote through the model).
Counted part: the size of each full table (turns and scored questions of data/locomo10.json, messages and questions
of a HaluMem file). Cited part: one published vLLM throughput (``--total-tps``, with its source and date). Projected
part: tokens / throughput. No LLM is called and no evaluation text is read (only run metrics and item counts).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.atomic import write_text_atomic

PUBLISHED = Path("results/published")
READ_PURPOSES = ("answer", "judge")  # per question; every other purpose is the system's own write path

# Which published run measures each system (dev data only). LoCoMo: the whole conv-26 run where one exists, else the
# quickstart slice (conv-26, first 3 sessions, 20 questions). MemGPT's only finished LoCoMo run stores turns in
# Letta's archival store without the model (ingest_mode=archival), so its write tokens come from the longest
# unfinished agent run (ingest_mode=messages) without failed turns, its questions from the finished run.
LOCOMO_RUNS = {
    "mosaic": "runs/locomo/mosaic/none/9627b2170da9",
    "rag": "runs/locomo/rag/none/b3b9f7514c93",
    "full_context": "runs/locomo/full_context/none/b23eb59d95a0",
    "mem0": "runs/locomo/mem0/none/d99de8208ac7",
    "amem": "runs/locomo/amem/none/b9bbe4cf7429",
    "zep": "runs/locomo/zep/none/a74eee2647a3",
    "memgpt": "runs/locomo/memgpt/none/d3b8ddbf61d0",
}
MEMGPT_AGENT_WRITES = "unfinished/locomo/memgpt/none/0a466b8893c2/ingest_cost.json"
CONFLICT_RUNS = {  # household_finance (dev); rag and full_context call no model on the conflict suite
    "mosaic": "runs/conflict/mosaic/none/624b38131477",
    "zep": "runs/conflict/zep/none/a07764ce0e9b",
}
NO_LLM_ON_CONFLICT = ("rag", "full_context")


@dataclass(frozen=True)
class Rate:
    """Tokens one system sends per unit of work (prompt, completion)."""

    prompt: float
    completion: float

    def times(self, n: float) -> "Rate":
        return Rate(self.prompt * n, self.completion * n)

    def plus(self, other: "Rate") -> "Rate":
        return Rate(self.prompt + other.prompt, self.completion + other.completion)

    @property
    def total(self) -> float:
        return self.prompt + self.completion


def _metrics(run: str) -> dict[str, Any]:
    return json.loads((PUBLISHED / run / "metrics.json").read_text(encoding="utf-8"))


def _split_usage(usage: dict[str, Any]) -> tuple[Rate, Rate, float]:
    """(write tokens, read tokens, share of prompt tokens the server's prefix cache served) of one run."""
    write, read, cached, prompt = Rate(0, 0), Rate(0, 0), 0.0, 0.0
    for purpose, row in (usage.get("by_purpose") or {}).items():
        rate = Rate(row.get("prompt_tokens", 0), row.get("completion_tokens", 0))
        read, write = (read.plus(rate), write) if purpose in READ_PURPOSES else (read, write.plus(rate))
        cached += row.get("server_cached_prompt_tokens", 0)
        prompt += row.get("prompt_tokens", 0)
    return write, read, (cached / prompt if prompt else 0.0)


def locomo_ingested_turns(data: Path, conversations: list[Any] | None, max_sessions: int | None) -> int:
    """Turns a LoCoMo slice ingests (counted from the file; no text read)."""
    samples = json.loads(data.read_text(encoding="utf-8"))
    total = 0
    for index, sample in enumerate(samples):
        if conversations is not None and index not in conversations and sample["sample_id"] not in conversations:
            continue
        conv = sample["conversation"]
        sessions = sorted((int(k.split("_")[1]) for k in conv if k.startswith("session_") and not k.endswith("date_time")))
        total += sum(len(conv[f"session_{n}"]) for n in sessions[: max_sessions or None])
    return total


def locomo_size(data: Path) -> tuple[int, int]:
    """(turns, scored questions: categories 1-4) of the whole LoCoMo file."""
    samples = json.loads(data.read_text(encoding="utf-8"))
    questions = sum(1 for s in samples for q in s["qa"] if q.get("category") != 5)
    return locomo_ingested_turns(data, None, None), questions


def halumem_size(path: Path) -> tuple[int, int, int]:
    """(users, dialogue messages, questions) of a HaluMem JSONL file."""
    users = messages = questions = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            user = json.loads(line)
            users += 1
            messages += sum(len(s["dialogue"]) for s in user["sessions"])
            questions += sum(len(s.get("questions") or []) for s in user["sessions"])
    return users, messages, questions


def measured_rates(locomo: Path) -> dict[str, dict[str, Any]]:
    """Per system: write tokens per ingested turn, read tokens per question, prefix-cache share, and the runs used."""
    import yaml

    rates: dict[str, dict[str, Any]] = {}
    for system, run in LOCOMO_RUNS.items():
        metrics = _metrics(run)
        bench = yaml.safe_load((PUBLISHED / run / "config.yaml").read_text(encoding="utf-8"))["benchmark"]
        turns = locomo_ingested_turns(locomo, bench.get("conversations"), bench.get("max_sessions"))
        questions = metrics["overall"]["n"]
        write, read, cached = _split_usage(metrics["metadata"]["llm_usage"])
        sources = [run]
        if system == "memgpt":
            agent = json.loads((PUBLISHED / MEMGPT_AGENT_WRITES).read_text(encoding="utf-8"))["by_turn"]
            write, turns = Rate(agent["prompt_tokens_per_turn"], agent["completion_tokens_per_turn"]), 1
            sources.append(f"{MEMGPT_AGENT_WRITES} ({agent['turns']} turns)")
        rates[system] = {"per_turn": write.times(1 / turns), "per_question": read.times(1 / questions),
                         "turns": turns, "questions": questions, "cached_share": cached, "sources": sources,
                         "context_turns": turns}  # fmt: skip
    for system, run in CONFLICT_RUNS.items():
        metrics = _metrics(run)
        write, read, _ = _split_usage(metrics["metadata"]["llm_usage"])
        rates[system]["per_case"] = write.plus(read).times(1 / metrics["n_cases"])
        rates[system]["sources"].append(f"{run} ({metrics['n_cases']} cases)")
    for system in NO_LLM_ON_CONFLICT:
        rates[system]["per_case"] = Rate(0, 0)
    return rates


def project(rates: dict[str, dict[str, Any]], locomo: tuple[int, int], halumem: tuple[int, int, int], conflict_cases: int,
            locomo_turns_per_conv: float) -> dict[str, dict[str, Rate | None]]:  # fmt: skip
    """Total tokens of each full table per system. full_context's answer prompt holds the whole conversation, so its
    per-question prompt is scaled from the measured slice to a whole conversation's length."""
    turns, questions = locomo
    _, messages, h_questions = halumem
    out: dict[str, dict[str, Rate | None]] = {}
    for system, r in rates.items():
        per_q: Rate = r["per_question"]
        if system == "full_context":
            per_q = Rate(per_q.prompt * locomo_turns_per_conv / r["context_turns"], per_q.completion)
        per_case = r.get("per_case")
        out[system] = {
            "locomo": r["per_turn"].times(turns).plus(per_q.times(questions)),
            "halumem": r["per_turn"].times(messages).plus(per_q.times(h_questions)),
            "conflict": per_case.times(conflict_cases) if per_case is not None else None,
        }
    return out


@dataclass(frozen=True)
class ServedRun:
    """One published serving benchmark: prompt and completion tokens it processed and how long it took."""

    name: str
    prompt: float
    completion: float
    seconds: float

    @classmethod
    def parse(cls, text: str) -> "ServedRun":
        name, prompt, completion, seconds = text.rsplit(":", 3)
        return cls(name, float(prompt), float(completion), float(seconds))


def seconds_per_token(a: ServedRun, b: ServedRun) -> tuple[float, float]:
    """(seconds per prompt token, seconds per completion token) that make both saturated runs take their time:
    a.prompt*x + a.completion*y = a.seconds, and the same for b (two equations, Cramer's rule). Two runs of one
    server with different prompt:completion mixes separate what reading and writing a token cost."""
    det = a.prompt * b.completion - a.completion * b.prompt
    if det == 0:
        raise ValueError(f"{a.name} and {b.name} mix prompt and completion tokens alike: the two costs cannot be told apart")
    x = (a.seconds * b.completion - a.completion * b.seconds) / det
    y = (a.prompt * b.seconds - a.seconds * b.prompt) / det
    if x <= 0 or y <= 0:
        raise ValueError(f"{a.name} and {b.name} give a per-token cost <= 0 ({x}, {y}): choose two other runs")
    return x, y


def _minutes(tokens: Rate | None, cost: tuple[float, float]) -> str:
    return "" if tokens is None else f"{(tokens.prompt * cost[0] + tokens.completion * cost[1]) / 60:,.1f}"


def _m(tokens: float | None) -> str:
    return "not measured" if tokens is None else f"{tokens / 1e6:.1f}"


def render(args: argparse.Namespace, rates: dict[str, dict[str, Any]], totals: dict[str, dict[str, Rate | None]],
           locomo: tuple[int, int], halumem: tuple[int, int, int]) -> str:  # fmt: skip
    lines = [
        "# Tokens of the full tables, and a projected wall time on one GPU (PROJECTION, not a measurement)",
        "",
        f"Written by `python -m research.gpu_projection {' '.join(args.argv)}`".rstrip() + " (no LLM call).",
        "",
        f"**Throughput cited**: {args.model} on {args.gpu}, {args.server}, from {args.source} ({args.dated}). Two of its "
        "saturated runs (baseline server settings): "
        + "; ".join(f"{r.name}: {r.prompt:,.0f} prompt + {r.completion:,.0f} completion tokens in {r.seconds:.2f} s"
                    for r in args.cited)  # fmt: skip
        + f". Solved for a cost per token of each kind: {1 / args.cost[0]:,.0f} prompt tokens/s and "
        f"{1 / args.cost[1]:,.0f} completion tokens/s; a cell's minutes are its prompt tokens / the first plus its "
        "completion tokens / the second.",
        "",
        "## Measured tokens per unit (Qwen2.5-Coder-1.5B-Instruct Q4_K_M on llama.cpp, its tokenizer and its reply lengths)",
        "",
        "| system | prompt / completion tokens per ingested turn | prompt / completion tokens per question (answer + judge) | tokens per conflict case | prefix-cache share of prompt tokens (llama.cpp, 2 slots) | runs (under results/published/) |",
        "|---|---|---|---|---|---|",
    ]
    for system, r in rates.items():
        t, q, c = r["per_turn"], r["per_question"], r.get("per_case")
        lines.append(f"| {system} | {t.prompt:,.0f} / {t.completion:,.0f} | {q.prompt:,.0f} / {q.completion:,.0f} | "
                     f"{'not measured' if c is None else f'{c.total:,.0f}'} | {r['cached_share']:.0%} | {'; '.join(r['sources'])} |")  # fmt: skip
    users, messages, h_questions = halumem
    lines += [
        "",
        "## Full tables: millions of tokens (prompt + completion), and projected minutes on that GPU",
        "",
        f"LoCoMo: {locomo[0]:,} turns, {locomo[1]:,} scored questions (categories 1-4 of data/locomo10.json). "
        f"HaluMem: {args.halumem} ({users} user(s), {messages:,} dialogue messages, {h_questions:,} questions); the whole "
        f"HaluMem-Medium table is this times (its users / {users}) — rerun with `--halumem data/HaluMem-Medium.jsonl`. "
        f"Conflict suite: {args.conflict_cases} cases (data/conflicts/hypertension.json, the count from its published runs).",
        "",
        "| system | LoCoMo M tokens | LoCoMo minutes | HaluMem M tokens | HaluMem minutes | conflict M tokens | conflict minutes |",
        "|---|---|---|---|---|---|---|",
    ]
    grand = Rate(0, 0)
    for system, t in totals.items():
        cells = []
        for bench in ("locomo", "halumem", "conflict"):
            tokens = t[bench]
            grand = grand.plus(tokens) if tokens is not None else grand
            cells += [_m(None if tokens is None else tokens.total), _minutes(tokens, args.cost)]
        lines.append(f"| {system} | {' | '.join(cells)} |")
    lines += [
        "",
        f"All measured cells together: {grand.total / 1e6:.0f} M tokens ({grand.prompt / 1e6:.0f} M prompt), "
        f"{_minutes(grand, args.cost)} minutes.",
        "",
        "## Assumptions (each moves the minutes; none is measured on a GPU)",
        "",
        "- **Throughput**: the cited runs kept up to 512 requests in flight; the costs hold only while the server is "
        "that busy. "
        "`experiment=paper_tables` keeps about n_jobs x run.workers = 96 requests in flight for systems that write "
        "conversations concurrently (MOSAIC, rag, full_context); on main when this was written Mem0, A-Mem, Zep and "
        "MemGPT write one conversation at a time, one request in flight during their ingest, so their minutes here "
        "are a lower bound until their adapters write concurrently (branch h54a does it for Mem0, A-Mem and Zep).",
        "- **Prefix caching**: no credit taken: every prompt token is counted as processed (an upper bound on prefill). "
        "vLLM's automatic prefix caching serves repeated prefixes (instructions, schemas, the held facts); the last "
        "column of the first table is the share llama.cpp served from its cache with two slots in the measured runs.",
        "- **Batch size / concurrency**: the source's scheduler decides the batch (vLLM's defaults; random prompts "
        "in one profile, ShareGPT conversations in the other); the harness's own batch is its in-flight requests (above). The two-cost fit takes a "
        "token's cost as independent of the prompt's length (prompts here are 0.5-20k tokens; the cited prompts "
        "average 1,034 and 342).",
        "- **Model**: tokens were counted with the 1.5B model's tokenizer and its replies (lengths, retries, Letta's "
        "heartbeats, Zep's dedupe calls all depend on the model); the projected model writes differently.",
        "- **Scaling**: per-turn write tokens from a conv-26 slice or the whole of conv-26 are taken as constant over "
        "a conversation; MOSAIC's conflict check and Mem0's and Zep's retrieval-conditioned prompts grow with the "
        "memory, so late turns cost more. full_context's per-question prompt is scaled to an average whole LoCoMo "
        f"conversation ({locomo[0] / args.locomo_conversations:,.0f} turns); past the model's context window it "
        "would be cut.",
        "- **HaluMem**: write tokens per dialogue message are LoCoMo's per turn (no development HaluMem run called "
        "the model); HaluMem's extraction and update judges (one call per memory point and update point) are not "
        "counted, so its rows are a lower bound.",
        "- **Missing cells**: Mem0, A-Mem and MemGPT (agent) have no published conflict-suite run that calls the "
        "model: 'not measured'.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=Path("data/locomo10.json"))
    parser.add_argument("--halumem", type=Path, default=Path("data/halumem-pilot/halumem_medium_user0.jsonl"),
                        help="a HaluMem JSONL; the default is the development user (one user)")  # fmt: skip
    parser.add_argument("--conflict-cases", type=int, default=82, help="cases of the conflict suite of Table 3")
    parser.add_argument("--cited", type=ServedRun.parse, action="append",
                        help="NAME:PROMPT_TOKENS:COMPLETION_TOKENS:SECONDS of a saturated published run (give two)")  # fmt: skip
    parser.add_argument("--model", default="Qwen/Qwen3.5-9B")
    parser.add_argument("--gpu", default="one NVIDIA H100 80GB HBM3")
    parser.add_argument("--server", default="vLLM v0.17.1 (guidellm through GPUStack's benchmark-runner)")
    parser.add_argument("--source", default="GPUStack Performance Lab, 'Optimizing Qwen3.5-9B Throughput', "
                        "https://docs.gpustack.ai/latest/performance-lab/qwen3.5-9b/h100 "
                        "(github.com/gpustack/gpustack docs/performance-lab/qwen3.5-9b/h100.md)")  # fmt: skip
    parser.add_argument("--dated", default="committed 2026-03-20 as github.com/gpustack/gpustack/commit/6ceec5b8; read 2026-12-07")
    parser.add_argument("--out", type=Path, default=Path("results/bench/gpu_projection.md"))
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else []
    # the page's "Throughput" profile (random, 1,024 in / 128 out) and "ShareGPT" profile, each 1,000 requests
    args.cited = args.cited or [ServedRun("Throughput profile", 1033932, 128000, 43.00),
                                ServedRun("ShareGPT profile", 342058, 281412, 54.74)]  # fmt: skip
    if len(args.cited) != 2:
        parser.error("--cited: give exactly two runs (their prompt:completion mixes must differ)")
    args.cost = seconds_per_token(*args.cited)
    samples = json.loads(args.locomo.read_text(encoding="utf-8"))
    args.locomo_conversations = len(samples)
    locomo = locomo_size(args.locomo)
    halumem = halumem_size(args.halumem)
    rates = measured_rates(args.locomo)
    totals = project(rates, locomo, halumem, args.conflict_cases, locomo[0] / len(samples))
    text = render(args, rates, totals, locomo, halumem)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, text)  # a table is replaced whole or not at all
    print(f"{text}\n{args.out}")
    return text


if __name__ == "__main__":
    main()
