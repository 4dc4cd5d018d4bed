"""A misbehaving OpenAI-compatible chat server for fault-injection tests (the fault is the point).

``FakeOpenAIServer(mode=...)`` serves ``/v1/models`` and ``/v1/chat/completions`` on 127.0.0.1 in a
thread. Modes: ``good`` (a short answer; for JSON-schema requests a valid judge verdict), ``empty``
(content ""), ``garbage`` (200 with a body that is not JSON), ``no_choices`` (200, JSON without
``choices``), ``truncated`` (cut-off JSON with finish_reason length), ``hang`` (sleeps ``hang_s``),
``fail_after`` (good for ``budget`` calls, then 500s), ``scripted`` (``script(payload, n)`` returns the
content and finish_reason: a model that loops at temperature 0 and not when sampled, say). The mode may be
changed between calls; every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Script = Callable[[dict[str, Any], int], tuple[str, str]]

MODEL_ID = "fake-model"


class FakeOpenAIServer:
    def __init__(self, mode: str = "good", hang_s: float = 30.0, budget: int = 0, script: Script | None = None) -> None:
        self.mode = "scripted" if script is not None and mode == "good" else mode
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.hang_s = hang_s
        self.budget = budget
        self.calls = 0  # chat completions received
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL_ID}]}).encode())

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.calls += 1
                    n = server.calls
                    server.requests.append(payload)
                status, body = server.reply(payload, n)
                try:
                    self._send(status, body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (hang mode)
                    pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reply(self, payload: dict[str, Any], n: int) -> tuple[int, bytes]:
        mode = self.mode
        if mode == "fail_after":
            mode = "good" if n <= self.budget else "error"
        if mode == "hang":
            time.sleep(self.hang_s)
            mode = "good"
        if mode == "error":
            return 500, b'{"error": "injected"}'
        if mode == "garbage":
            return 200, b"<html>proxy error</html>"
        if mode == "no_choices":
            return 200, json.dumps({"object": "chat.completion", "id": "x"}).encode()
        schema = "response_format" in payload
        content, finish = ("Caroline went to a support group.", "stop")
        if schema:
            content = json.dumps({"reasoning": "same event", "label": "CORRECT"})
        if mode == "empty":
            content = ""
        if mode == "truncated":
            content, finish = ('{"reasoning": "same ev', "length") if schema else ("Caroline went to", "length")
        if mode == "scripted":
            assert self.script is not None, "mode scripted needs script="
            content, finish = self.script(payload, n)
        body = {
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": MODEL_ID,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }  # fmt: skip
        return 200, json.dumps(body).encode()

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

