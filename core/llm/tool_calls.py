"""OpenAI-compatible tool calling for any chat backend, by schema-constrained generation.

Small local models rarely write the tool-call markup their chat template expects (Qwen2.5-Coder
1.5B on llama.cpp writes the call as JSON in a Markdown block instead of ``<tool_call>`` tags),
so a server that parses that markup finds no call. This layer sits in front of the harness's
``LLMClient``: for a request with ``tools`` it describes the tools in the prompt, asks the backend
for a json_schema-constrained reply (``{"name": <one of the tools>, "arguments": <that tool's
parameters>}``) and returns it as ``tool_calls``. It needs nothing from the backend but
``response_format`` json_schema, which llama.cpp, vLLM and OpenAI all honour, and it does not know
who its client is (Letta, or anything else that speaks the OpenAI tools API).

vLLM could do this natively instead (``--enable-auto-tool-choice --tool-call-parser hermes`` for
Qwen), but a parser still depends on the model writing the markup; the schema does not.

The same server answers ``/v1/embeddings`` from the harness's local embedder (MiniLM, 384 dims),
so libraries that need an OpenAI embedding endpoint (Letta) get one with no network.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.api import ChatResult, LLMClient, LLMError, LLMOutputError
from core.llm.client import ClientClosedError, RetryPolicy
from core.llm.schema_caps import cap_strings

log = logging.getLogger(__name__)

TEXT_REPLY = "__reply_with_text__"  # the pseudo-tool a model may pick when tool_choice is "auto"

# The tag of the endpoint a request came in on (``/v1/agents/<tag>/chat/completions``; None on ``/v1/...``), set
# while the request is answered: a client with many agents (Letta) gives each its own endpoint, so the
# ``canonical_request`` hook and the per-tag stats know whose request it is when several are in flight.
ROUTE_TAG: contextvars.ContextVar[str | None] = contextvars.ContextVar("tool_call_route_tag", default=None)


# -- request translation (pure, unit-tested) ---------------------------------------------------
def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    params = dict(_function(tool).get("parameters") or {})
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return params


def allowed_tools(tools: list[dict[str, Any]], tool_choice: Any) -> list[dict[str, Any]]:
    """The tools the reply may call: all of them, or the one a ``{"type": "function", ...}`` choice names."""
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        picked = [t for t in tools if _function(t).get("name") == wanted]
        if not picked:
            raise ValueError(f"tool_choice names {wanted!r}, which is not among the request's tools")
        return picked
    return tools


def tool_call_schema(tools: list[dict[str, Any]], allow_text: bool, string_max_chars: int | None = None) -> dict[str, Any]:
    """A JSON schema whose instances are exactly one call: a tool's name and arguments valid for it
    (every string argument at most ``string_max_chars`` long when set; see ``cap_strings``)."""
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": _function(t)["name"]}, "arguments": cap_strings(_parameters(t), string_max_chars)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    if allow_text:
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": TEXT_REPLY}, "arguments": cap_strings({
                    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
                    string_max_chars)},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return options[0] if len(options) == 1 else {"anyOf": options}


def _signature(tool: dict[str, Any]) -> str:
    """``name(arg: type, ...): first paragraph of the description``: what the model needs to pick a
    tool; the schema constrains the arguments, so the full parameter schema need not be in the prompt."""
    fn = _function(tool)
    params = _parameters(tool)
    args = ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in params["properties"].items())
    summary = (fn.get("description") or "").strip().split("\n\n")[0].replace("\n", " ")
    return f"- {fn['name']}({args}): {summary[:400]}"


def tools_instruction(tools: list[dict[str, Any]], allow_text: bool) -> str:
    """The tool list as the model reads it (the backend no longer sees ``tools``)."""
    lines = [
        "You can call these tools. Reply with exactly one JSON object "
        '{"name": <tool name>, "arguments": {...}} and nothing else.',
        *(_signature(tool) for tool in tools),
    ]
    if allow_text:
        lines.append(f"- {TEXT_REPLY}(text: string): answer in plain text instead of calling a tool.")
    return "\n".join(lines)


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def flatten_messages(messages: list[dict[str, Any]], instruction: str | None) -> list[dict[str, str]]:
    """Plain role/content messages: earlier tool calls as the JSON the model is asked to write,
    tool results as user messages that name the tool; the tool instruction joins the first system message."""
    names: dict[str, str] = {}
    out: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role", "user")
        content = _text(message.get("content"))
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                fn = call.get("function", {})
                names[call.get("id", "")] = fn.get("name", "")
                try:
                    arguments = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    arguments = fn.get("arguments")
                calls.append(json.dumps({"name": fn.get("name"), "arguments": arguments}))
            content = "\n".join([content, *calls]).strip()
        elif role == "tool":
            name = message.get("name") or names.get(message.get("tool_call_id", ""), "tool")
            role, content = "user", f"[result of tool {name}]\n{content}"
        elif role not in ("system", "user", "assistant"):
            role = "user"
        out.append({"role": role, "content": content})
    if instruction:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + instruction}
        else:
            out.insert(0, {"role": "system", "content": instruction})
    return out


def parse_tool_call(text: str, tools: list[dict[str, Any]], allow_text: bool) -> tuple[str, dict[str, Any]]:
    """The (name, arguments) in ``text``, checked against the tool's parameter schema."""
    import jsonschema

    try:
        reply = json.loads(text)
    except json.JSONDecodeError as err:
        raise LLMOutputError(f"tool-call reply is not JSON: {err}: {text[:200]!r}") from err
    if not isinstance(reply, dict) or not isinstance(reply.get("arguments"), dict):
        raise LLMOutputError(f"tool-call reply lacks name/arguments: {text[:200]!r}")
    name = reply.get("name")
    if allow_text and name == TEXT_REPLY:
        return name, reply["arguments"]
    by_name = {_function(t)["name"]: t for t in tools}
    if name not in by_name:
        raise LLMOutputError(f"tool-call reply names unknown tool {name!r} (known: {sorted(by_name)})")
    try:
        jsonschema.validate(reply["arguments"], _parameters(by_name[name]))
    except jsonschema.ValidationError as err:
        raise LLMOutputError(f"arguments of {name} break its schema: {err.message}") from err
    return name, reply["arguments"]


def completion_body(model: str, result: ChatResult, name: str | None, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """An OpenAI chat.completion object: a tool call, or plain text when ``name`` is None."""
    if name is None or name == TEXT_REPLY:
        text = result.text if name is None else str((arguments or {}).get("text", ""))
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}],
        }
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        },
    }


def embeddings_body(model: str, vectors: np.ndarray, base64_format: bool, n_tokens: int) -> dict[str, Any]:
    """An OpenAI embedding list; ``base64`` is what the openai client asks for by default."""
    data = []
    for index, vector in enumerate(np.asarray(vectors, dtype=np.float32)):
        value: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode() if base64_format else vector.tolist()
        data.append({"object": "embedding", "index": index, "embedding": value})
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}


# -- the server ------------------------------------------------------------------------------
@dataclass
class ToolCallStats:
    """How tool requests went: well-formed on the first try, after retries, or not at all."""

    tool_requests: int = 0
    well_formed_first_try: int = 0
    well_formed_after_retry: int = 0
    malformed: int = 0
    text_replies: int = 0
    plain_requests: int = 0
    embedding_requests: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    # the replies used, by where they came from: the model (with the prompt tokens the server's prefix cache
    # covered: usage.prompt_tokens_details.cached_tokens) or the harness's response cache
    model_replies: int = 0
    cache_replies: int = 0
    prompt_tokens: int = 0
    server_cached_prompt_tokens: int = 0
    refused_while_closing: int = 0

    def count_reply(self, result: ChatResult) -> None:
        if result.cached:
            self.cache_replies += 1
            return
        self.model_replies += 1
        self.prompt_tokens += result.prompt_tokens
        self.server_cached_prompt_tokens += result.cached_prompt_tokens


class ToolServerClosedError(ClientClosedError):
    """A request that reached the tool-call layer after ``close()`` began: answered 503, never sent to the LLM."""


# Longest wait for the HTTP server's own shutdown once every handler has answered (seconds).
STOP_GRACE_S = 2.0
# How often a request handler looks whether the server is closing while its LLM call runs (seconds).
CLOSING_POLL_S = 0.2


class ToolCallServer:
    """An in-process OpenAI-compatible server (starlette + uvicorn on 127.0.0.1) in front of ``llm``.

    ``/v1/chat/completions``: requests with ``tools`` become one json_schema-constrained call
    (retried as ``retry`` says, ``attempts`` tries in all when no policy is given, if the reply is cut off or breaks
    the tool's schema); others
    pass through as plain chat. Every call goes through ``llm``, so the harness's meter (under
    ``purpose``) and response cache see it. ``/v1/embeddings`` encodes with ``embedder``.
    """

    def __init__(
        self,
        llm: LLMClient,
        embedder: Any = None,
        purpose: str = "tool_calls",
        attempts: int = 2,
        retry: RetryPolicy | None = None,
        default_max_tokens: int = 512,
        max_tokens_cap: int | None = None,
        string_max_chars: int | None = None,
        model_name: str | None = None,
        request_log: str | None = None,
        canonical_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.llm = llm
        # applied to each request before anything reads it (cache key, prompt): what a client varies from run to
        # run without meaning (Letta's clock readings, its order of blocks and tools) made canonical, so the same
        # request is asked the same way
        self.canonical_request = canonical_request
        self.request_log = Path(request_log) if request_log else None  # JSONL of tool requests and replies, for audits
        self.embedder = embedder
        self.purpose = purpose
        self.retry = retry or RetryPolicy(attempts=attempts, temperature=0.0, seed=1)  # default: seeds 1, 2, ... greedy
        self.attempts = self.retry.attempts
        self.default_max_tokens = default_max_tokens
        self.max_tokens_cap = max_tokens_cap
        self.string_max_chars = string_max_chars  # cap on every string argument a reply may write (cap_strings)
        self._model_name = model_name
        self.stats = ToolCallStats()
        self.stats_by_tag: dict[str, ToolCallStats] = {}  # the same reply counts per endpoint tag (ROUTE_TAG)
        self._stats_lock = threading.Lock()
        self._in_flight: dict[str, Future] = {}
        self._closing = threading.Event()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def model_name(self) -> str:
        """The served model's id, asked of the backend only when first needed (not at construction)."""
        return self._model_name or self.llm.model_id

    # request handling, independent of HTTP (unit tests call these directly)
    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat request; an identical request already in flight is waited for, not re-run:
        clients time out and retry (the openai client after 600 s), and on a slow CPU the first
        call is still running then."""
        key = json.dumps(request, sort_keys=True)
        with self._stats_lock:
            running = self._in_flight.get(key)
            if running is None:
                mine: Future = Future()
                self._in_flight[key] = mine
        if running is not None:
            return running.result()
        try:
            body = self._complete(request)
            mine.set_result(body)
            return body
        except BaseException as err:
            mine.set_exception(err)
            raise
        finally:
            with self._stats_lock:
                self._in_flight.pop(key, None)

    def _refuse_if_closing(self) -> None:
        if self._closing.is_set():
            with self._stats_lock:
                self.stats.refused_while_closing += 1
            raise ToolServerClosedError("the tool-call server is closing (the run is stopping); request refused, nothing sent to the LLM")

    def _count(self, result: ChatResult) -> None:
        tag = ROUTE_TAG.get()
        with self._stats_lock:
            self.stats.count_reply(result)
            if tag is not None:
                self.stats_by_tag.setdefault(tag, ToolCallStats()).count_reply(result)

    def tag_stats(self, tag: str) -> ToolCallStats:
        """A copy of the reply counts of the requests that came in on endpoint ``tag``."""
        with self._stats_lock:
            held = self.stats_by_tag.get(tag) or ToolCallStats()
            return ToolCallStats(**{**held.__dict__, "by_tool": dict(held.by_tool)})

    def _complete(self, request: dict[str, Any]) -> dict[str, Any]:
        self._refuse_if_closing()
        if self.canonical_request is not None:
            request = self.canonical_request(request)
        max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or self.default_max_tokens)
        if self.max_tokens_cap:
            max_tokens = min(max_tokens, self.max_tokens_cap)
        temperature = float(request.get("temperature") or 0.0)
        seed = int(request.get("seed") or 0)
        tools = request.get("tools") or []
        tool_choice = request.get("tool_choice", "auto")
        if not tools or tool_choice == "none":
            with self._stats_lock:
                self.stats.plain_requests += 1
            result = self.llm.chat(flatten_messages(request.get("messages", []), None), max_tokens=max_tokens,
                                   temperature=temperature, seed=seed, purpose=self.purpose)
            self._count(result)
            return completion_body(self.model_name, result, None, None)
        callable_tools = allowed_tools(tools, tool_choice)
        allow_text = tool_choice == "auto"
        schema = tool_call_schema(callable_tools, allow_text, self.string_max_chars)
        messages = flatten_messages(request.get("messages", []), tools_instruction(callable_tools, allow_text))
        last: LLMOutputError | None = None
        last_text = ""
        for attempt in range(self.attempts):
            # A reply the client itself refuses (cut off at max_tokens, not JSON) is retried like one that parses but
            # breaks the tool's schema, with the retry's own sampling (RetryPolicy: greedy decoding loops the same way).
            self._refuse_if_closing()  # a retry never starts once the server is closing
            try:
                try_temperature, try_seed = self.retry.sampling(attempt, temperature, seed)
                result = self.llm.chat(messages, response_schema=schema, max_tokens=max_tokens, temperature=try_temperature,
                                       seed=try_seed, purpose=self.purpose)
                last_text = result.text
                self._count(result)
                name, arguments = parse_tool_call(result.text, callable_tools, allow_text)
            except LLMOutputError as err:
                last = err
                log.warning("tool-call reply broke the schema (attempt %d/%d): %s", attempt + 1, self.attempts, err)
                continue
            with self._stats_lock:
                self.stats.tool_requests += 1
                if name == TEXT_REPLY:
                    self.stats.text_replies += 1
                elif attempt == 0:
                    self.stats.well_formed_first_try += 1
                else:
                    self.stats.well_formed_after_retry += 1
                self.stats.by_tool[name] = self.stats.by_tool.get(name, 0) + 1
            self._log(request, result.text, name)
            return completion_body(self.model_name, result, name, arguments)
        self._log(request, last_text or str(last), None)
        with self._stats_lock:
            self.stats.tool_requests += 1
            self.stats.malformed += 1
        assert last is not None
        raise last

    def _log(self, request: dict[str, Any], reply: str, name: str | None) -> None:
        if self.request_log is not None:
            with self._stats_lock, self.request_log.open("a") as handle:
                handle.write(json.dumps({"request": request, "reply": reply, "tool": name}) + "\n")

    def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.embedder is None:
            raise LLMOutputError("this tool-call server was started without an embedder")
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        if not all(isinstance(t, str) for t in texts):
            raise LLMOutputError("/v1/embeddings: input must be a string or a list of strings (token ids are not supported)")
        with self._stats_lock:
            self.stats.embedding_requests += 1
        vectors = self.embedder.encode(texts) if texts else np.zeros((0, self.embedder.dim), dtype=np.float32)
        n_tokens = sum(len(t.split()) for t in texts)  # whitespace words: an estimate, MiniLM's cost is not metered
        return embeddings_body(str(request.get("model") or self.embedder.model_id), vectors,
                               request.get("encoding_format") == "base64", n_tokens)

    # HTTP
    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        def closing() -> JSONResponse:
            return JSONResponse({"error": {"message": "the tool-call server is closing (the run is stopping)", "type": "closing"}}, 503)

        async def unless_closing(fn: Callable[[dict[str, Any]], dict[str, Any]], body: dict[str, Any]) -> dict[str, Any] | None:
            """``fn(body)`` on a worker thread; None as soon as the server is closing (the thread is abandoned:
            closing the LLM client aborts its call) rather than waiting for a generation nobody needs."""
            if self._closing.is_set():
                return None
            task = asyncio.ensure_future(run_in_threadpool(fn, body))
            while not task.done():
                await asyncio.wait({task}, timeout=CLOSING_POLL_S)
                if self._closing.is_set() and not task.done():
                    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # its error is nobody's now
                    return None
            return task.result()

        def tagged(fn: Callable[[dict[str, Any]], dict[str, Any]], request: Request) -> Callable[[dict[str, Any]], dict[str, Any]]:
            """``fn`` with ROUTE_TAG set to the request's endpoint tag in the thread that answers it."""
            tag = request.path_params.get("tag")

            def run(body: dict[str, Any]) -> dict[str, Any]:
                ROUTE_TAG.set(tag)
                return fn(body)

            return run

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            if body.get("stream"):
                return JSONResponse({"error": {"message": "streaming is not supported by the tool-call layer; send stream=false"}}, 400)
            try:
                reply = await unless_closing(tagged(self.complete, request), body)
            except (LLMOutputError, ValueError) as err:
                return JSONResponse({"error": {"message": str(err), "type": "invalid_response"}}, 502)
            except (LLMError, ClientClosedError) as err:  # the LLM server unreachable, or the run stopping: not the model's fault
                return JSONResponse({"error": {"message": str(err), "type": "unavailable"}}, 503)
            return closing() if reply is None else JSONResponse(reply)

        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            try:
                reply = await unless_closing(self.embed, body)
            except LLMOutputError as err:
                return JSONResponse({"error": {"message": str(err)}}, 400)
            return closing() if reply is None else JSONResponse(reply)

        async def models(request: Request) -> JSONResponse:
            ids = [self.model_name] + ([self.embedder.model_id] if self.embedder is not None else [])
            return JSONResponse({"object": "list", "data": [{"id": i, "object": "model", "owned_by": "mosaic-bench"} for i in ids]})

        async def health(request: Request) -> JSONResponse:
            return JSONResponse({"status": "ok"})

        return Starlette(routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/agents/{tag}/chat/completions", chat, methods=["POST"]),
            Route("/v1/agents/{tag}/embeddings", embeddings, methods=["POST"]),
            Route("/v1/agents/{tag}/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ])

    @property
    def api_base(self) -> str:
        if self._server is None:
            self.start()
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 30.0) -> None:
        """Serve on a free loopback port in a daemon thread; returns once the server accepts requests."""
        if self._server is not None:
            return
        self._refuse_if_closing()
        import uvicorn

        from core.llm.local_server import free_port

        self.port = free_port()
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
                                timeout_graceful_shutdown=STOP_GRACE_S)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="tool-call-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server = None
                raise RuntimeError(f"tool-call server did not start on 127.0.0.1:{self.port} within {timeout_s:.0f} s")
            time.sleep(0.05)
        log.info("tool-call server on %s (backend %s)", f"http://127.0.0.1:{self.port}/v1", self.model_name)

    def begin_close(self) -> None:
        """Refuse every new request and answer the ones in flight with 503 at once (their LLM calls are
        abandoned, not waited for): the client (Letta) stops stepping, so it can itself stop quickly."""
        self._closing.set()

    def close(self) -> None:
        """``begin_close``, then stop serving; waits at most ``STOP_GRACE_S`` for the server thread."""
        self.begin_close()
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=STOP_GRACE_S + 1)
                if self._thread.is_alive():
                    self._server.force_exit = True
                    log.warning("tool-call server on port %s did not stop within %.0f s; left to exit with the process", self.port, STOP_GRACE_S + 1)
        self._server = None
        self._thread = None

    def __enter__(self) -> "ToolCallServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
