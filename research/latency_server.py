"""A SIMULATED OpenAI-compatible LLM server: a latency model of a GPU server, no model inside.

Each chat completion waits ``fixed_s + per_prompt_token_s * prompt_tokens + per_token_s *
completion_tokens`` and answers a fixed text (for ``json_schema`` requests, a fixed JSON object
with a ``label`` of ``CORRECT``). At most ``max_in_flight`` requests are served at once (a batch
limit); the rest queue. Per-token time does not grow with the batch, which a real GPU's does a
little: this measures the harness (its overhead and how it scales), not a GPU.

Tests and research/bench_throughput.py start it in-process with ``LatencyServer(...).start()``;
``python -m research.latency_server --port 8011`` serves it standalone (e.g. for run.py with
``llm=openai_compat llm.base_url=http://127.0.0.1:8011 llm.model=latency-model llm.api_key_env=null``).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "latency-model"


@dataclass(frozen=True)
class LatencyModel:
    fixed_s: float = 0.05
    per_prompt_token_s: float = 0.0
    per_token_s: float = 0.005
    max_in_flight: int = 64
    chars_per_token: float = 4.0

    def service_s(self, prompt_tokens: int, completion_tokens: int) -> float:
        return self.fixed_s + self.per_prompt_token_s * prompt_tokens + self.per_token_s * completion_tokens


def answer_for(request: dict[str, Any]) -> str:
    """The fixed reply: a JSON object that fits a judge-style schema, or one short sentence."""
    if (request.get("response_format") or {}).get("type") == "json_schema":
        schema = request["response_format"]["json_schema"].get("schema", {})
        props = schema.get("properties", {})
        return json.dumps({name: ("CORRECT" if name == "label" else "simulated") for name in props} or {"label": "CORRECT"})
    return "A simulated answer."


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # listen backlog: the default 5 resets connections when 32+ clients connect at once
    daemon_threads = True


class LatencyServer:
    """ThreadingHTTPServer speaking /v1/models and /v1/chat/completions under a ``LatencyModel``."""

    def __init__(self, model: LatencyModel | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model or LatencyModel()
        self._slots = threading.BoundedSemaphore(self.model.max_in_flight)
        self.served = 0
        self.busy_s = 0.0  # summed simulated service time
        self._count_lock = threading.Lock()
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
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
                elif self.path == "/health":
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": f"no route {self.path}"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                text = answer_for(request)
                prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
                prompt_tokens = int(prompt_chars / server.model.chars_per_token) + 1
                completion_tokens = min(int(len(text) / server.model.chars_per_token) + 1, int(request.get("max_tokens") or 10**6))
                wait = server.model.service_s(prompt_tokens, completion_tokens)
                with server._slots:
                    time.sleep(wait)
                with server._count_lock:
                    server.served += 1
                    server.busy_s += wait
                self._send(200, {
                    "id": f"sim-{server.served}", "object": "chat.completion", "model": MODEL_ID,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens},
                })  # fmt: skip

        self._httpd = _Server((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "LatencyServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="latency-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "LatencyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--fixed-s", type=float, default=LatencyModel.fixed_s)
    parser.add_argument("--per-prompt-token-s", type=float, default=LatencyModel.per_prompt_token_s)
    parser.add_argument("--per-token-s", type=float, default=LatencyModel.per_token_s)
    parser.add_argument("--max-in-flight", type=int, default=LatencyModel.max_in_flight)
    args = parser.parse_args(argv)
    model = LatencyModel(args.fixed_s, args.per_prompt_token_s, args.per_token_s, args.max_in_flight)
    server = LatencyServer(model, args.host, args.port)
    print(f"SIMULATED LLM (latency model {model}) at {server.base_url}/v1", flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":
    main()
