"""When does Letta evict and summarise in a whole LoCoMo conversation? A control-flow measurement, no quality number.

MemGPT's main context is bounded (``system.context_window``, 8192). Letta 0.11.7's agent loop sums the
``total_tokens`` the model reports over the steps of one message; past the context window it evicts the oldest
30% of the messages in context to recall memory and puts a recursive summary (one plain LLM call) in their
place. So *when* it evicts is driven by token counts, not by what the model says, and a scripted model can
drive a real Letta server through a whole conversation in minutes instead of days of CPU generation.

The scripted model (``ScriptedTokenCountingModel``) stands in for the LLM behind the tool-call layer:

* it counts each request's prompt tokens exactly as the real local server would (the Qwen2.5-Coder chat
  template and tokenizer, through llama.cpp's ``/apply-template`` and ``/tokenize`` on the configured GGUF:
  no generation), and the reply's tokens the same way, and reports them as ``usage``;
* to a tool request it answers with one ``send_message`` step per turn, as the real model did on the
  issue's slice, whose ``thinking`` restates the turn and whose message acknowledges it (so the history grows
  by a realistic amount per turn: the report compares it with the real model's growth);
* to Letta's summary request it answers with a summary under Letta's 100-word limit built from the evicted
  turns; to anything else (the harness's answerer, judge) a fixed short reply.

Every request is logged (``requests.jsonl``: kind, prompt and completion tokens, messages); the turns come from
the run's own record (``system/turn_costs.jsonl``: ``prompt_messages`` per turn, a drop is an eviction).

    python -m research.letta_eviction --conversation 0 --out results/bench/letta_eviction_conv26

writes ``<out>.json`` (per turn and per eviction) and ``<out>.md`` (the command, the eviction turns, caveats).
Run under ``nice``: the Letta server and the harness are CPU work, the scripted model costs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
MODEL_ID = "scripted-token-counting"
TURN = re.compile(r"\[([^\]]+)\] ([^:\n\[\]\"]+): ([^\n\"]*)")  # a turn inside a transcript
ONE_TURN = re.compile(r"\[([^\]]+)\] ([^:\n\[\]]+): (.*)", re.S)  # one benchmark turn as the agent is sent it
SUMMARY_MARK = "Your job is to summarize a history of previous messages"  # Letta's summariser system prompt
SUMMARY_WORDS = 100  # Letta's own limit in that prompt (letta/prompts/gpt_summarize.py)


class Tokenizer:
    """Token counts of the real local model: its chat template and vocabulary, served by llama.cpp (no generation)."""

    def __init__(self, model: str) -> None:
        from core.llm import LocalLLM

        self.llm = LocalLLM(model=model, context_tokens=512, parallel=1, threads=1, verbosity=0)
        self.llm.start()
        self.base = self.llm.base_url
        self.http = httpx.Client(timeout=60)

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        flat = [{"role": m.get("role", "user"), "content": _text(m.get("content"))} for m in messages]
        prompt = self.http.post(f"{self.base}/apply-template", json={"messages": flat}).raise_for_status().json()["prompt"]
        return self.count(prompt)

    def count(self, text: str) -> int:
        return len(self.http.post(f"{self.base}/tokenize", json={"content": text}).raise_for_status().json()["tokens"])

    def close(self) -> None:
        self.http.close()
        self.llm.close()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def latest_turn(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(speaker, text) of the latest benchmark turn the agent was sent (``[<date>] <speaker>: <text>``)."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = _text(message.get("content"))
        try:  # Letta packs a user message as JSON: {"type": "user_message", "message": ..., "time": ...}
            match = ONE_TURN.match(str(json.loads(content).get("message") or ""))
        except (json.JSONDecodeError, AttributeError):
            match = TURN.search(content)
        if match:
            return match.group(2).strip(), match.group(3).strip()
    return None


def tool_options(payload: dict[str, Any]) -> list[str]:
    """The tool names a request's schema allows (the tool-call layer's ``{"name": {"const": ...}}`` options)."""
    schema = ((payload.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    options = schema.get("anyOf") or ([schema] if "name" in schema.get("properties", {}) else [])
    return [str(((o.get("properties") or {}).get("name") or {}).get("const", "")) for o in options]


def scripted_reply(payload: dict[str, Any]) -> tuple[str, str]:
    """(kind, content) of the scripted model's reply to one request."""
    messages = payload.get("messages") or []
    everything = "\n".join(_text(m.get("content")) for m in messages)
    if "send_message" in tool_options(payload):
        turn = latest_turn(messages) or ("the user", "a message")
        speaker, text = turn
        call = {"name": "send_message", "arguments": {
            "thinking": f"{speaker} said: {text[:400]} I should acknowledge it and remember the details.",
            "message": f"Thanks for sharing that, {speaker}. {text[:160]}"}}
        return "step", json.dumps(call)
    if SUMMARY_MARK in everything:
        turns = [f"{m.group(2).strip()}: {' '.join(m.group(3).split()[:8])}" for m in TURN.finditer(everything)]
        words = ("I talked with the user. " + "; ".join(turns)).split()[:SUMMARY_WORDS]
        return "summary", " ".join(words)
    if payload.get("response_format"):
        return "other", json.dumps({"reasoning": "scripted", "label": "CORRECT"})
    return "other", "I do not know."


class ScriptedTokenCountingModel:
    """An OpenAI-compatible chat endpoint in a thread: scripted replies, real token counts, every request logged."""

    def __init__(self, tokenizer: Tokenizer, log_path: Path) -> None:
        self.tokenizer = tokenizer
        self.log_path = log_path
        self.calls = 0
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": MODEL_ID}]})

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(model.answer(payload))

            def _send(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def answer(self, payload: dict[str, Any]) -> dict[str, Any]:
        kind, content = scripted_reply(payload)
        with self._lock:  # one at a time, like the local server: the log's order is the call order
            self.calls += 1
            prompt = self.tokenizer.prompt_tokens(payload.get("messages") or [])
            completion = self.tokenizer.count(content)
            row = {"n": self.calls, "kind": kind, "prompt_tokens": prompt, "completion_tokens": completion,
                   "messages": len(payload.get("messages") or []), "turn": (latest_turn(payload.get("messages") or []) or ("", ""))[1][:80]}
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
        return {"id": f"chatcmpl-{row['n']}", "object": "chat.completion", "created": 0, "model": MODEL_ID,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}

    def __enter__(self) -> "ScriptedTokenCountingModel":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_slice(url: str, conversation: int, max_sessions: int | None, workdir: Path, extra: list[str]) -> Path:
    """run.py on the whole conversation with MemGPT against the scripted model; the run folder."""
    command = [sys.executable, "run.py", "experiment=locomo", "system=memgpt", f"benchmark.conversations=[{conversation}]",
               f"benchmark.max_sessions={'null' if max_sessions is None else max_sessions}", "benchmark.max_questions=1", "llm=openai_compat", f"llm.base_url={url}",
               f"llm.model={MODEL_ID}", "llm.api_key_env=null", "logger=none", f"results_dir={workdir / 'results'}",
               f"cache_dir={workdir / 'cache'}", *extra]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with (workdir / "run.log").open("w") as log:
        done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run.py failed ({done.returncode}): see {workdir / 'run.log'}")
    return Path(done.stdout.strip().splitlines()[-1]).parent


def analyse(run_dir: Path, requests: list[dict[str, Any]], context_window: int) -> dict[str, Any]:
    """Per turn: the requests it made. The run's record counts every request a turn sent through the tool-call
    layer (``model_replies`` + ``cache_replies``), which partitions the request log in order; Letta's own usage
    report (``usage.calls``) leaves its summary call out."""
    turns = [json.loads(line) for line in (run_dir / "system" / "turn_costs.jsonl").read_text().splitlines() if line.strip()]
    rows, position = [], 0
    for index, turn in enumerate(turns, start=1):
        calls = int(turn.get("model_replies", 0)) + int(turn.get("cache_replies", 0)) if "model_replies" in turn else int(turn["usage"]["calls"])
        made = requests[position:position + calls]
        position += calls
        steps = [r for r in made if r["kind"] == "step"]
        rows.append({"turn_index": index, "turn_id": turn["turn_id"], "steps": len(steps),
                     "summaries": sum(r["kind"] == "summary" for r in made),
                     "summary_prompt_tokens": sum(r["prompt_tokens"] for r in made if r["kind"] == "summary"),
                     "prompt_tokens": steps[-1]["prompt_tokens"] if steps else None,
                     "total_tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in steps),
                     "step_messages": max((r["messages"] for r in steps), default=None), "seconds": turn["seconds"]})
    evictions = [r for r in rows if r["summaries"]]
    growth = [b["prompt_tokens"] - a["prompt_tokens"] for a, b in zip(rows, rows[1:])
              if a["prompt_tokens"] and b["prompt_tokens"] and not a["summaries"]]
    gaps = [b["turn_index"] - a["turn_index"] for a, b in zip(evictions, evictions[1:])]
    log_file = run_dir / "system" / "letta_server.log"
    log_text = log_file.read_text(errors="replace") if log_file.exists() else ""
    return {
        "turns": len(rows), "requests_logged": len(requests), "requests_mapped": position,
        "context_window": context_window,
        "eviction_turns": [r["turn_index"] for r in evictions],
        "turns_between_evictions": {"min": min(gaps), "median": sorted(gaps)[len(gaps) // 2], "max": max(gaps)} if gaps else None,
        "evictions": [{"turn_index": r["turn_index"], "turn_id": r["turn_id"], "total_tokens": r["total_tokens"],
                       "messages_in_context": r["step_messages"], "summary_prompt_tokens": r["summary_prompt_tokens"],
                       "messages_next_turn": rows[r["turn_index"]]["step_messages"] if r["turn_index"] < len(rows) else None,
                       "prompt_tokens_next_turn": rows[r["turn_index"]]["prompt_tokens"] if r["turn_index"] < len(rows) else None}
                      for r in evictions],
        "summary_requests": sum(r["kind"] == "summary" for r in requests),
        "letta_log_over_window_lines": log_text.count("exceeds configured max tokens"),
        "median_prompt_growth_per_turn": sorted(growth)[len(growth) // 2] if growth else None,
        "first_prompt_tokens": rows[0]["prompt_tokens"] if rows else None,
        "max_prompt_tokens": max((r["prompt_tokens"] or 0) for r in rows) if rows else None,
        "per_turn": rows,
    }


def write_report(out: Path, result: dict[str, Any], command: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        f"# Letta's eviction and recursive summary over a whole conversation ({result['conversation']})",
        "",
        "Control flow only: a scripted model (one `send_message` step per turn) behind the tool-call layer, with the",
        "real model's token counts (its chat template and tokenizer). No quality number. Made by:",
        "",
        f"    {command}",
        "",
        f"- turns: {result['turns']}; context window (`system.context_window`): {result['context_window']}",
        f"- prompt tokens of the first turn's step: {result['first_prompt_tokens']}; largest: {result['max_prompt_tokens']};"
        f" median growth per turn (turns without eviction): {result['median_prompt_growth_per_turn']}",
        f"- evictions with a recursive summary: {len(result['eviction_turns'])}; Letta's log lines 'exceeds configured max tokens':"
        f" {result['letta_log_over_window_lines']}",
        f"- at turn indices (1-based, in ingest order): {result['eviction_turns']}; turns between evictions: {result['turns_between_evictions']}",
        f"- requests: {result['requests_logged']} logged, {result['requests_mapped']} mapped to turns by the run's per-turn call counts",
        f"- wall time: {result['wall_s']:.0f} s ({result['git_sha']})",
        "",
        "| eviction turn | turn id | total tokens of that message | messages in its step | summary prompt tokens |"
        " next turn: messages | next turn: prompt tokens |",
        "|---:|---|---:|---:|---:|---:|---:|",
        *[f"| {e['turn_index']} | {e['turn_id']} | {e['total_tokens']} | {e['messages_in_context']} | {e['summary_prompt_tokens']} |"
          f" {e['messages_next_turn']} | {e['prompt_tokens_next_turn']} |" for e in result["evictions"]],
        "",
        "Why it happens there: Letta 0.11.7 (`LettaAgent`) sums the model's `total_tokens` over a message's steps and,",
        "past the context window, evicts the oldest 30% of the in-context messages to recall memory and replaces them",
        "with one summary message (`summarizer_settings.partial_evict_summarizer_percentage`). With the real model the",
        "turn indices move with its step count and reply lengths: this run's growth per turn is compared with the real",
        "model's in docs/baselines.md.",
        "",
    ]
    out.with_suffix(".md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversation", type=int, default=0, help="LoCoMo conversation index (0 = conv-26, a development conversation)")
    parser.add_argument("--out", type=Path, default=REPO / "results/bench/letta_eviction_conv26")
    parser.add_argument("--max-sessions", type=int, default=None, help="only the first N sessions (default: the whole conversation)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m", help="the GGUF whose tokenizer counts tokens")
    parser.add_argument("--workdir", type=Path, default=None, help="where the run folder goes (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*", help="extra run.py overrides")
    args = parser.parse_args(argv)
    from omegaconf import OmegaConf

    context_window = int(OmegaConf.load(REPO / "conf/system/memgpt.yaml").context_window)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="letta_eviction_"))
    workdir.mkdir(parents=True, exist_ok=True)
    conversation = json.loads((REPO / "data/locomo10.json").read_text())[args.conversation]["sample_id"]
    if conversation == "conv-49":
        raise SystemExit("--conversation: conv-49 is evaluation data; use a development conversation")
    log_path = workdir / "requests.jsonl"
    log_path.write_text("")
    started = time.monotonic()
    git_sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    tokenizer = Tokenizer(args.model)
    try:
        with ScriptedTokenCountingModel(tokenizer, log_path) as model:
            run_dir = run_slice(model.url, args.conversation, args.max_sessions, workdir, args.overrides)
    finally:
        tokenizer.close()
    requests = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    result = {"conversation": conversation, **analyse(run_dir, requests, context_window), "run_dir": str(run_dir),
              "wall_s": time.monotonic() - started, "git_sha": git_sha}
    command = "nice -n 15 python -m research.letta_eviction " + " ".join(argv if argv is not None else sys.argv[1:])
    write_report(args.out, result, command.strip())
    print(f"{result['turns']} turns, evictions at {result['eviction_turns']}; {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
