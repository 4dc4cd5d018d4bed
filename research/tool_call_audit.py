"""How the tool calls of a run went, from the tool-call layer's request log, finished run or not.

    python -m research.tool_call_audit <run folder> [--out audit.json]

Why: MemGPT's issue asks how often a small model's tool calls are well-formed and how often they are
sensible, and a MemGPT run here can be stopped long before its metrics are written. The tool-call layer
(core/llm/tool_calls.py) appends every tool request and the reply it returned to
``<run folder>/system/tool_requests.jsonl``; this reads that log alone (no LLM, no server):

* well-formed: the reply parsed as one of the offered tools with arguments valid for it (``tool`` set);
  malformed: no valid call after the layer's retries (``tool`` null);
* which tools were called, and how many steps an agent message took (steps are grouped by the request's
  last user message that is not a heartbeat: the conversation message the agent is still answering);
* loops: a call whose tool and arguments repeat the step just before it in the same chain; a chain that
  ends without the agent's reply tool (``--reply-tool``, Letta's ``send_message``) hit the step limit.

"Sensible" is not decided here beyond those two signs: the log holds the prompts for reading by hand.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from core.atomic import write_json_atomic
from eval.rows import read_rows

LOG = Path("system") / "tool_requests.jsonl"


def _is_heartbeat(content: Any) -> bool:
    """MemGPT's automated continuation message (Letta packs it as JSON ``{"type": "heartbeat", ...}``)."""
    try:
        return isinstance(content, str) and json.loads(content).get("type") == "heartbeat"
    except (json.JSONDecodeError, AttributeError):
        return False


def _chain_key(request: dict[str, Any]) -> str:
    """The conversation message a step answers: the last user message that is not a heartbeat (tool
    results and heartbeats come after it while the agent keeps stepping)."""
    for message in reversed(request.get("messages", [])):
        content = message.get("content")
        if message.get("role") == "user" and not _is_heartbeat(content):
            return json.dumps(content, sort_keys=True) if not isinstance(content, str) else content
    return ""


def _call(reply: str) -> tuple[str | None, str]:
    try:
        parsed = json.loads(reply)
        return parsed.get("name"), json.dumps(parsed.get("arguments"), sort_keys=True)
    except (json.JSONDecodeError, AttributeError):
        return None, reply


def audit(entries: list[dict[str, Any]], reply_tool: str = "send_message") -> dict[str, Any]:
    by_tool: Counter[str] = Counter()
    chains: dict[str, list[tuple[str | None, str]]] = {}
    malformed = 0
    for entry in entries:
        tool = entry.get("tool")
        if tool is None:
            malformed += 1
        else:
            by_tool[tool] += 1
        chains.setdefault(_chain_key(entry.get("request", {})), []).append(_call(str(entry.get("reply", ""))) if tool else (None, ""))
    repeats = sum(1 for steps in chains.values() for before, now in zip(steps, steps[1:]) if now[0] is not None and now == before)
    n = len(entries)
    return {
        "tool_requests": n,
        "well_formed": n - malformed,
        "malformed": malformed,
        "well_formed_share": (n - malformed) / n if n else None,
        "by_tool": dict(by_tool.most_common()),
        "chains": len(chains),
        "steps_per_chain": n / len(chains) if chains else None,
        "chains_ending_with_reply": sum(1 for steps in chains.values() if steps and steps[-1][0] == reply_tool),
        "repeated_calls": repeats,
        "reply_tool": reply_tool,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--reply-tool", default="send_message", help="the tool by which an agent answers (Letta: send_message)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    path = args.run_dir / LOG
    if not path.is_file():
        raise SystemExit(f"{path} is missing: only runs whose system uses the tool-call layer (system=memgpt) write it")
    report = {"run": str(args.run_dir), **audit(read_rows(path, key_field=None), args.reply_tool)}
    print(json.dumps(report, indent=2))
    if args.out is not None:
        write_json_atomic(args.out, report, indent=2)
    return report


if __name__ == "__main__":
    main()
