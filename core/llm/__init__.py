"""LLM access for the whole harness: one OpenAI-compatible client, its cache and meter, the local server, the library tap."""

from core.api import ChatResult, LLMClient, LLMError, LLMOutputError, ServedLLM
from core.llm.cache import ResponseCache
from core.llm.client import GuardedLLM, OpenAICompatClient, RetryPolicy, retry_policy
from core.llm.local_server import FLASH_ATTN_MODES, LocalLLM, default_model_name, free_port
from core.llm.meter import UsageMeter, own_usage, usage_since

__all__ = [
    "FLASH_ATTN_MODES",
    "GuardedLLM",
    "ChatResult",
    "LLMClient",
    "LLMError",
    "LLMOutputError",
    "LocalLLM",
    "OpenAICompatClient",
    "ResponseCache",
    "RetryPolicy",
    "ServedLLM",
    "UsageMeter",
    "default_model_name",
    "free_port",
    "own_usage",
    "retry_policy",
    "usage_since",
]
