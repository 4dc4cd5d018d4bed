"""Running LLM usage totals by purpose, and the usage between two snapshots."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

from core.api import ChatResult, LLMUsage


@dataclass
class UsageMeter:
    """Thread-safe running totals, split by purpose; also keeps every latency for percentiles."""

    usage: LLMUsage = field(default_factory=LLMUsage)
    latencies_s: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # the same totals per calling thread: with run.workers > 1 a stage measures its own calls (thread_snapshot)
    _by_thread: dict[int, LLMUsage] = field(default_factory=dict, repr=False)

    def record(self, purpose: str, result: ChatResult) -> None:
        with self._lock:
            self._add(self.usage, purpose, result)
            self._add(self._by_thread.setdefault(threading.get_ident(), LLMUsage()), purpose, result)
            if not result.cached:
                self.latencies_s.append(result.latency_s)

    @staticmethod
    def _add(u: LLMUsage, purpose: str, result: ChatResult) -> None:
        u.calls += 1
        u.prompt_tokens += result.prompt_tokens
        u.completion_tokens += result.completion_tokens
        u.cached_calls += int(result.cached)
        bucket = u.by_purpose.setdefault(purpose, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        bucket["calls"] += 1
        bucket["prompt_tokens"] += result.prompt_tokens
        bucket["completion_tokens"] += result.completion_tokens
        if result.cached_prompt_tokens:  # how much of the prompt the server's prefix cache covered
            bucket["server_cached_prompt_tokens"] = bucket.get("server_cached_prompt_tokens", 0) + result.cached_prompt_tokens

    def snapshot(self) -> LLMUsage:
        with self._lock:
            return LLMUsage(**json.loads(json.dumps(self.usage.__dict__)))

    def thread_snapshot(self) -> LLMUsage:
        """Totals of the calls made from the calling thread only (not from threads it started)."""
        with self._lock:
            return LLMUsage(**json.loads(json.dumps(self._by_thread.get(threading.get_ident(), LLMUsage()).__dict__)))


def own_usage(llm: object) -> LLMUsage:
    """Usage of the calls made from the calling thread, for a caller that makes every call itself
    (MOSAIC's write path): correct whether or not other threads (run.workers) share the client.
    A client without a per-thread meter gives its totals."""
    meter = getattr(llm, "meter", None)
    if hasattr(meter, "thread_snapshot"):
        return meter.thread_snapshot()
    return getattr(llm, "usage", None) or LLMUsage()


def usage_since(before: LLMUsage, after: LLMUsage) -> LLMUsage:
    """The usage accrued between two snapshots of a meter."""
    by_purpose: dict[str, dict[str, int]] = {}
    for purpose, counts in after.by_purpose.items():
        old = before.by_purpose.get(purpose, {})
        delta = {k: v - old.get(k, 0) for k, v in counts.items()}
        if any(delta.values()):
            by_purpose[purpose] = delta
    return LLMUsage(
        calls=after.calls - before.calls,
        prompt_tokens=after.prompt_tokens - before.prompt_tokens,
        completion_tokens=after.completion_tokens - before.completion_tokens,
        cached_calls=after.cached_calls - before.cached_calls,
        by_purpose=by_purpose,
    )
