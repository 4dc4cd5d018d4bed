"""An agent-style memory system with Letta's shape, for stop tests without Letta (the shape is the point).

``python tests/fake_agent.py <port>`` is the agent server: a separate process that, for each message it is
sent (``POST /message {"tool_url": ..., "steps": n}``), asks the tool-call layer for ``steps`` tool calls
one after another, and keeps stepping after a failed step (a 503, a refused connection), as Letta's loop
does. ``ToolCallingAgent`` is the harness side (a ``MemorySystem``): it starts the tool-call layer in front
of the harness LLM and the agent server as a ``ManagedProcess``, sends each turn as one message, and closes
in MemGPT's order (tool-call layer refuses, agent server stopped, tool-call server stopped).
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOOLS = [{"type": "function", "function": {"name": "send_message", "description": "Reply to the user.", "parameters": {
    "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}}]


def serve(port: int) -> None:
    import urllib.error
    import urllib.request

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._send(200, {"status": "ok"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            failed = 0
            for step in range(int(body.get("steps", 1))):
                request = {"model": "m", "messages": [{"role": "user", "content": f"{body.get('text', '')} (step {step})"}],
                           "tools": TOOLS, "tool_choice": "required"}
                try:
                    urllib.request.urlopen(urllib.request.Request(
                        body["tool_url"], data=json.dumps(request).encode(), headers={"Content-Type": "application/json"}), timeout=600)
                except (urllib.error.URLError, OSError):
                    failed += 1
                    time.sleep(0.2)  # and step on, like Letta's queued steps
            self._send(200, {"failed_steps": failed})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    import os
    import signal
    import threading

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = False  # like Letta's server: on SIGTERM, finish the messages in flight, then exit
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown).start())
    print(f"pid {os.getpid()}", flush=True)
    httpd.serve_forever()
    httpd.server_close()  # waits for the handlers in flight


class ToolCallingAgent:
    """A ``MemorySystem`` whose every add goes agent server -> tool-call layer -> harness LLM, as MemGPT's does."""

    def __init__(self, llm: Any, embedder: Any, workdir: str, name: str = "fake_agent", steps: int = 3, stop_grace_s: float = 10.0) -> None:
        import httpx

        from core.llm import free_port
        from core.llm.tool_calls import ToolCallServer
        from core.servers import ManagedProcess

        self.name = name
        self.steps = steps
        self.tools = ToolCallServer(llm, model_name="m")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = ManagedProcess(
            "fake agent server", [sys.executable, str(Path(__file__).resolve()), str(port)],
            healthy=lambda: httpx.get(self.url, timeout=2, trust_env=False).status_code == 200,
            log_path=Path(workdir) / "fake_agent.log", stop_grace_s=stop_grace_s)
        self._http = httpx.Client(timeout=600, trust_env=False)

    def reset(self, namespace: str) -> None:
        pass

    def add(self, namespace: str, turns: list[Any], session_time: str | None = None) -> Any:
        from core.api import AddReport

        self.process.start()
        for turn in turns:
            self._http.post(self.url, json={"tool_url": self.tools.api_base + "/chat/completions", "steps": self.steps, "text": turn.text})
        return AddReport(n_turns=len(turns))

    def search(self, namespace: str, query: str, k: int) -> list[Any]:
        return []

    def close(self) -> None:
        self.tools.begin_close()
        self._http.close()
        self.process.stop()
        self.tools.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
