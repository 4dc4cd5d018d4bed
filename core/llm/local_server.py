"""xllamacpp's in-process OpenAI-compatible llama.cpp server, started and stopped by the harness."""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from core.config_check import Count, Positive
from core.llm.client import OpenAICompatClient

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_model_name(model: str) -> str:
    """The id a local model is served (and cached) under: the known name, or the file's name."""
    return Path(model).name.removesuffix(".gguf") if model.endswith(".gguf") else model


# llama.cpp's flash-attention switch (its enum: -1 auto, 0 off, 1 on). On this 2-core CPU "auto" turns it
# on; off generates faster deep in a long context and reads prompts slower (Mem0's adds: docs/baselines.md).
FLASH_ATTN_MODES = {"auto": -1, "off": 0, "on": 1}

# Speculative decoding (llm.speculative): "none"; "draft" (a small draft model of the same tokenizer family,
# llm.draft_model, proposes llm.draft_max tokens that the main model checks in one batch); or one of llama.cpp's
# draft-free n-gram lookups, which propose continuations seen earlier in the prompt or the reply (extraction
# copies names and phrases from the message, and JSON keys from the few-shot example). Greedy verification keeps
# the main model's own choice at every position, so replies are the same up to floating-point ties.
SPECULATIVE_TYPES = {
    "none": "COMMON_SPECULATIVE_TYPE_NONE",
    "draft": "COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE",
    "ngram_simple": "COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE",
    "ngram_map_k": "COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K",
    "ngram_mod": "COMMON_SPECULATIVE_TYPE_NGRAM_MOD",
    "ngram_cache": "COMMON_SPECULATIVE_TYPE_NGRAM_CACHE",
}


class LocalLLM(OpenAICompatClient):
    """xllamacpp's in-process OpenAI-compatible server on 127.0.0.1, started on first use.

    It speaks the same HTTP API as vLLM, so everything downstream exercises the vLLM path.
    """

    _lock = threading.Lock()

    def __init__(
        self,
        model: str,
        model_name: str | None = None,
        hub_filename: str | None = None,
        context_tokens: Count = 16384,
        threads: Count | None = None,
        parallel: Count = 1,
        cache_path: str | None = None,
        timeout_s: Positive = 600.0,
        max_retries: Count = 3,
        extra_body: dict[str, Any] | None = None,
        verbosity: int = 1,
        flash_attn: str | bool = "auto",
        remember_output_faults: bool = True,
        speculative: str = "none",
        draft_model: str | None = None,
        draft_max: int = 8,
        draft_min: int = 0,
        draft_p_min: float = 0.0,
        cache_reuse: int = 0,
    ) -> None:
        if isinstance(flash_attn, bool):  # YAML 1.1 readers turn a bare on/off into a bool
            flash_attn = "on" if flash_attn else "off"
        if flash_attn not in FLASH_ATTN_MODES:
            raise ValueError(f"llm.flash_attn={flash_attn!r}: use one of {sorted(FLASH_ATTN_MODES)}")
        if speculative not in SPECULATIVE_TYPES:
            raise ValueError(f"llm.speculative={speculative!r}: use one of {sorted(SPECULATIVE_TYPES)}")
        if speculative == "draft" and not draft_model:
            raise ValueError("llm.speculative=draft needs llm.draft_model (e.g. qwen2.5-coder-0.5b-instruct, same tokenizer family)")
        if int(draft_max) < 1 or not 0 <= int(draft_min) <= int(draft_max) or not 0.0 <= float(draft_p_min) <= 1.0:
            raise ValueError(f"llm.draft_max={draft_max} must be >= 1, llm.draft_min={draft_min} in [0, draft_max], llm.draft_p_min={draft_p_min} in [0, 1]")
        if int(cache_reuse) < 0:
            raise ValueError(f"llm.cache_reuse={cache_reuse} must be >= 0 (0: off; else the smallest chunk reused by KV shifting)")
        super().__init__(
            base_url="",
            model=model_name or default_model_name(model),
            cache_path=cache_path,
            timeout_s=timeout_s,
            max_retries=max_retries,
            extra_body=extra_body,
            context_tokens=context_tokens,
            remember_output_faults=remember_output_faults,
        )
        self.model_spec = model
        self.hub_filename = hub_filename
        self.threads = threads or os.cpu_count() or 2
        self.parallel = parallel
        self.verbosity = verbosity  # llama.cpp log level: 1 keeps warnings/errors, 3 logs every slot event
        self.flash_attn = flash_attn
        self.speculative = speculative
        self.draft_model = draft_model
        self.draft_max, self.draft_min, self.draft_p_min = int(draft_max), int(draft_min), float(draft_p_min)
        self.cache_reuse = int(cache_reuse)
        self._server: Any = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            self.start()
        return self._base_url

    def start(self) -> None:
        """Load the model and serve it; refused once ``close()`` was called (a stopping run never starts it again)."""
        self.refuse_if_closed()
        with self._lock:
            self.refuse_if_closed()  # closed while another thread held the lock
            if self._server is not None:
                return
            import xllamacpp

            from core.model_files import resolve_model

            path = resolve_model(self.model_spec, hub_filename=self.hub_filename)
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.model_alias = self._model or path.stem
            params.n_ctx = int(self.context_tokens or 8192) * self.parallel
            params.n_parallel = self.parallel
            # Keep each slot's KV cache in place when it goes idle, so the next request that shares its
            # prefix (the same few-shot block, Mem0's ~8k-token system prompt) picks that slot by
            # similarity and reuses it. llama.cpp's default moves idle slots to a host-RAM prompt cache
            # instead: a restore of ~3 s per request at 7.7k tokens (0.5B model, /tmp test), and in one
            # Mem0 run two consecutive adds sharing a 7.9k-token prefix got no reuse (cause not found).
            params.cache_idle_slots = False
            params.flash_attn_type = FLASH_ATTN_MODES[self.flash_attn]
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.hostnames = ["127.0.0.1"]
            params.port = free_port()
            params.embedding = False
            params.verbosity = self.verbosity
            params.n_cache_reuse = self.cache_reuse
            self._configure_speculative(params, xllamacpp)
            log.info("starting local LLM %s on 127.0.0.1:%d", path.name, params.port)
            server = xllamacpp.Server(params)
            if self._closed:  # closed while the model loaded: drop it, start nothing
                del server
                self.refuse_if_closed()
            self._server = server
            self._base_url = str(server.listening_address).rstrip("/")

    def _configure_speculative(self, params: Any, xllamacpp: Any) -> None:
        """Set llama.cpp's speculative decoding from llm.speculative / llm.draft_* (no-op for "none")."""
        if self.speculative == "none":
            return
        from core.model_files import resolve_model

        spec = params.speculative
        spec.types = [getattr(xllamacpp.common_speculative_type, SPECULATIVE_TYPES[self.speculative])]
        spec.draft.n_max, spec.draft.n_min, spec.draft.p_min = self.draft_max, self.draft_min, self.draft_p_min
        if self.speculative == "draft":
            assert self.draft_model is not None
            spec.draft.mparams.path = str(resolve_model(self.draft_model))
            spec.draft.cpuparams.n_threads = self.threads
            spec.draft.cpuparams_batch.n_threads = self.threads
        log.info("speculative decoding: %s (draft_max %d)", self.speculative, self.draft_max)

    def close(self) -> None:
        """Refuse later calls, abort the ones in flight (llama.cpp drops a generation whose client went away),
        then let the server go. Never waits for a generation, and never takes the start lock: a thread that
        is starting the model finds the client closed when it is done and drops what it started."""
        super().close()
        self._server = None  # the server stops when its object is collected
