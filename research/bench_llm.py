"""LLM backend throughput: prompt-processing and generation speed of an OpenAI-compatible server.

Every cost in this harness is LLM time, so the speed of the backend decides what fits a time
budget (e.g. the conflict suite's 30 minutes). This measures it the same way for the in-process
llama.cpp server (``--model <name or .gguf>``) and any running server (``--base-url``, e.g. vLLM):

* prompt: ``--rounds`` calls with a fresh ~``--prompt-tokens`` prompt (a unique first line, so no
  prefix cache applies) and ``max_tokens=1``: prompt tokens / wall time;
* generation: ``--rounds`` calls with a short prompt asking to count, ``max_tokens=--gen-tokens``:
  completion tokens / (wall time - the share of the prompt the server had to read, at the measured
  prompt speed). With ``--depth N`` the ask follows a fixed ~N-token text (read once in a warm-up
  call, then reused from the server's prefix cache), which measures generation deep in a long context
  as Mem0's ~8.6k-token prompts need it. ``--flash-attn`` sets llama.cpp's attention kernel (local only).

No response cache is used. Results go to ``<out>/llm_throughput.json`` (one entry per backend,
so runs for several backends accumulate side by side).

Usage: ``python -m research.bench_llm --model qwen2.5-coder-1.5b-instruct-q4_k_m`` or
``python -m research.bench_llm --base-url http://gpu-box:8000/v1 --served-model <id>``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

from core.llm import LocalLLM, OpenAICompatClient

FILLER = (
    "Blood pressure targets, drug classes, monitoring intervals and lifestyle advice are written "
    "down so that the memory system can be checked against them later. "
)


def measure(client: OpenAICompatClient, rounds: int, prompt_tokens: int, gen_tokens: int, depth: int = 0) -> dict:
    prompt_rates, gen_rates = [], []
    for _ in range(rounds):
        text = f"Note {uuid.uuid4()}\n" + FILLER * max(1, prompt_tokens // 30)
        started = time.perf_counter()
        result = client.chat([{"role": "user", "content": text + "\nReply with one word."}], max_tokens=1, purpose="bench")
        prompt_rates.append(result.prompt_tokens / (time.perf_counter() - started))
    prompt_rate = statistics.median(prompt_rates)
    context = ("Background notes, read them and then follow the instruction at the end.\n" + FILLER * (depth // 30) + "\n") if depth else ""
    if context:  # warm-up: the server reads the shared context once; the rounds reuse it from its prefix cache
        client.chat([{"role": "user", "content": context + "Reply with one word."}], max_tokens=1, purpose="bench")
    for i in range(rounds):
        ask = f"Run {uuid.uuid4()}: count from 1 to 500, one number per line, nothing else."
        started = time.perf_counter()
        result = client.chat([{"role": "user", "content": context + ask}], max_tokens=gen_tokens, purpose="bench", seed=i)
        read = result.prompt_tokens - result.cached_prompt_tokens
        elapsed = time.perf_counter() - started - read / prompt_rate
        gen_rates.append(result.completion_tokens / max(elapsed, 1e-6))
    return {
        "prompt_tokens_per_s": round(prompt_rate, 1),
        "generation_tokens_per_s": round(statistics.median(gen_rates), 1),
        "prompt_rounds": [round(r, 1) for r in prompt_rates],
        "generation_rounds": [round(r, 1) for r in gen_rates],
        "generation_context_tokens": result.prompt_tokens,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--model", help="local model name or .gguf path (in-process llama.cpp server)")
    target.add_argument("--base-url", help="a running OpenAI-compatible server, e.g. http://host:8000/v1")
    parser.add_argument("--served-model", default=None, help="model id on --base-url (default: the server's first)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--flash-attn", default="auto", choices=["auto", "on", "off"], help="llama.cpp attention kernel (--model only)")
    parser.add_argument("--depth", type=int, default=0, help="measure generation after a shared ~N-token context")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=600)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--note", default="", help="free text stored with the result (e.g. what else ran)")
    args = parser.parse_args(argv)
    if args.model:
        client: OpenAICompatClient = LocalLLM(
            model=args.model, threads=args.threads, cache_path=None, flash_attn=args.flash_attn,
            context_tokens=max(16384, args.depth + 1024),
        )
        backend = f"local:{client.model_id}" + (f"|flash_attn={args.flash_attn}" if args.flash_attn != "auto" else "")
    else:
        client = OpenAICompatClient(base_url=args.base_url, model=args.served_model, cache_path=None)
        backend = f"{args.base_url}:{client.model_id}"
    backend += f"|depth={args.depth}" if args.depth else ""
    try:
        row = {"backend": backend, **measure(client, args.rounds, args.prompt_tokens, args.gen_tokens, args.depth)}
    finally:
        client.close()
    row.update({"cpus": os.cpu_count(), "python": platform.python_version(), "note": args.note,
                "command": " ".join([Path(sys.executable).name, *sys.argv]), "when": time.strftime("%Y-%m-%dT%H:%M:%S")})
    path = Path(args.out) / "llm_throughput.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = json.loads(path.read_text()) if path.exists() else {}
    table[backend] = row
    path.write_text(json.dumps(table, indent=2))
    print(json.dumps(row, indent=2))
    print(path)
    return row


if __name__ == "__main__":
    main()
