"""The Letta server the MemGPT row runs on: its environment, its process and the HTTP connection to it.

Letta 0.11.7 lives in its own venv (``.venv-letta``; its pins clash with ours), built on the first use of
system=memgpt (``ensure_letta``). ``LettaServer`` runs ``letta server`` as a ``ManagedProcess`` with ``HOME`` in the
run folder, so its SQLite database lives with the run and a killed run resumes against it; it repairs Letta's
SQLite schema on start (``fix_archives_agents_default``) and talks to it over one HTTP client per thread, renewed
after a server error (``send_over_fresh_connection_if_reset``). Kept apart from ``baselines.memgpt`` (the
MemorySystem adapter: agents, ledgers, what an add changed) so the adapter reads as the mapping it is.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from core.llm.local_server import free_port
from core.servers import ManagedProcess

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
# Builds .venv-letta (Letta 0.11.7 in its own venv, its pins clash with ours); only system=memgpt needs it, so
# the set-up leaves it to the first use (or `bash scripts/setup.sh --with-letta`).
LETTA_SETUP = REPO / "scripts" / "setup_letta.sh"
MANAGED_LETTA = REPO / ".venv-letta" / "bin" / "letta"


def ensure_letta(letta_path: str, setup_script: Path = LETTA_SETUP, managed: Path = MANAGED_LETTA) -> None:
    """Build the Letta environment on first use when ``letta_path`` is the one the set-up script makes.

    A ``letta_bin`` pointing elsewhere is the user's own install: a missing one is an error, not a build.
    A file lock keeps two runs from building it at once; the second waits and finds it built."""
    if Path(letta_path).exists():
        return
    if Path(letta_path).resolve() != managed.resolve():
        raise FileNotFoundError(f"system.letta_bin={letta_path} is missing: install Letta 0.11.7 there, or use the default .venv-letta/bin/letta (built on first use)")
    from filelock import FileLock

    venv = managed.parents[1]
    setup_log = venv.with_name(venv.name + "-setup.log")
    with FileLock(str(venv.with_name(venv.name + ".lock"))):
        if Path(letta_path).exists():
            return
        log.warning("building the Letta 0.11.7 environment in %s on first use of system=memgpt (about 90 s, once; log: %s)", venv, setup_log)
        with open(setup_log, "w") as out:
            done = subprocess.run(["bash", str(setup_script)], cwd=setup_script.parents[1], stdout=out, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0 or not Path(letta_path).exists():
            raise RuntimeError(f"building {venv} failed (exit {done.returncode}): see {setup_log}, then rerun `bash scripts/setup_letta.sh`")


# -- SQLite schema fix (unit-tested) -----------------------------------------------------------
def fix_archives_agents_default(db_path: str | Path) -> bool:
    """Letta 0.11.x on SQLite declares ``archives_agents.created_at DEFAULT 'now()'`` (a literal string),
    so every archival insert fails with "Invalid isoformat string". Rebuild that table with
    ``DEFAULT CURRENT_TIMESTAMP``, keeping its rows. Returns whether a fix was applied (False if the
    table is already right). Safe while the server runs: SQLite re-prepares on a schema change."""
    with sqlite3.connect(db_path, timeout=60) as con:
        row = con.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='archives_agents'").fetchone()
        if row is None:
            raise RuntimeError(f"{db_path} has no archives_agents table: start the Letta server once before the fix")
        if "'now()'" not in row[0]:
            return False
        fixed_sql = row[0].replace("DEFAULT 'now()'", "DEFAULT CURRENT_TIMESTAMP").replace(
            "CREATE TABLE archives_agents", "CREATE TABLE archives_agents_fixed", 1)
        con.execute("PRAGMA foreign_keys=OFF")
        con.executescript(
            "BEGIN;"
            f"{fixed_sql};"
            "INSERT INTO archives_agents_fixed SELECT * FROM archives_agents;"
            "DROP TABLE archives_agents;"
            "ALTER TABLE archives_agents_fixed RENAME TO archives_agents;"
            "COMMIT;"
        )
    return True


# -- HTTP to the server (unit-tested) ----------------------------------------------------------
# Requests that change nothing on the server, so sending one twice is safe.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def send_over_fresh_connection_if_reset(
    http: httpx.Client, reconnect: Callable[[], httpx.Client], method: str, path: str, **kwargs: Any
) -> tuple[httpx.Client, httpx.Response]:
    """Send one request; return the client to use from now on and the response.

    Letta's server (uvicorn) closes a connection after an unhandled error (its 500s), so the next request on
    that pooled connection can be reset before the server reads it (seen live: a failed turn's 500, then
    the adapter's archival listing died with "Connection reset by peer" and took the run with it). After
    any 5xx the client is replaced, so no later request reuses that connection, and an idempotent request
    that meets a reset or a closed connection is sent once more on a new client. A POST is never re-sent:
    it may have reached the agent."""
    try:
        response = http.request(method, path, **kwargs)
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError):
        if method.upper() not in IDEMPOTENT_METHODS:
            raise
        http.close()
        http = reconnect()
        response = http.request(method, path, **kwargs)
    if response.status_code >= 500:
        http.close()
        http = reconnect()
    return http, response


class LettaError(RuntimeError):
    """The Letta server answered an error; the message names the request and the server's log."""


# -- the server process --------------------------------------------------------------------------
class LettaServer:
    """``letta server`` on a free local port, ``HOME`` (and its SQLite database) in ``workdir``/letta_home, its
    log in ``workdir``/letta_server.log; requests over one HTTP client per thread."""

    def __init__(self, letta_path: str, workdir: Path, start_timeout_s: float, request_timeout_s: float, stop_grace_s: float) -> None:
        self.letta_path = letta_path
        self.workdir = workdir
        self.home = workdir / "letta_home"
        self.log_path = workdir / "letta_server.log"
        self.start_timeout_s = start_timeout_s
        self.request_timeout_s = request_timeout_s
        self.stop_grace_s = stop_grace_s  # Letta's SIGTERM-to-SIGKILL wait when the run stops
        self.process: ManagedProcess | None = None
        self.base_url = ""
        self.start_s: float | None = None  # seconds the last start took
        self.schema_fixed = False
        self._generation = 0  # server starts so far: a thread's HTTP client belongs to one
        self._clients: list[httpx.Client] = []  # every thread's client, closed by close_clients()
        self._clients_lock = threading.Lock()
        self._local = threading.local()  # one HTTP client per thread
        self._ready = False  # start() has returned: healthy and its schema fixed

    @property
    def running(self) -> bool:
        """Up and ready for requests. Not merely spawned: the process runs from the moment start() spawns it, while
        start() still waits for its health check and fixes its schema; a thread that took that for "running" (the
        adapter's start-once check, with several namespaces written at once) sent its first request to a port that
        did not answer yet."""
        return self._ready and self.process is not None and self.process.running

    def start(self) -> None:
        self._ready = False
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        self.home.mkdir(parents=True, exist_ok=True)
        env = {"HOME": str(self.home), "OPENAI_API_KEY": "sk-no-key-needed", "LETTA_TELEMETRY_DISABLED": "true",
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        self.process = ManagedProcess(
            "letta server", [self.letta_path, "server", "--host", "127.0.0.1", "--port", str(port)],
            healthy=lambda: httpx.get(f"{self.base_url}/v1/health/", timeout=5, trust_env=False).status_code == 200,
            log_path=self.log_path, env=env, cwd=self.home,  # it writes openapi_letta.json to its cwd
            unset_env=("LETTA_PG_URI",),  # a Postgres URI in the shell would move the agent's store out of the run folder
            start_timeout_s=self.start_timeout_s, stop_grace_s=self.stop_grace_s)
        started = time.perf_counter()
        self.process.start()
        self.start_s = round(time.perf_counter() - started, 1)
        self.schema_fixed = fix_archives_agents_default(self.home / ".letta" / "sqlite.db") or self.schema_fixed
        self._generation += 1  # a restarted server: every thread's client is renewed
        self._ready = True
        log.info("letta server up in %.0f s on %s (schema fix applied: %s)", self.start_s, self.base_url, self.schema_fixed)

    def close_clients(self) -> None:
        """Drop every thread's connection (a request in flight ends with an error)."""
        with self._clients_lock:
            for http in self._clients:
                http.close()
            self._clients = []

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_grace_s``."""
        self._ready = False
        if self.process is not None:
            self.process.stop()
            self.process = None

    def _new_http(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=self.request_timeout_s, trust_env=False)

    def _thread_http(self) -> httpx.Client:
        """This thread's client to Letta (httpx clients are shared safely, but one may be replaced after a 5xx)."""
        local = self._local
        if getattr(local, "http", None) is None or getattr(local, "generation", None) != self._generation:
            local.http, local.generation = self._new_http(), self._generation
            with self._clients_lock:
                self._clients.append(local.http)
        return local.http

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON of Letta's answer (None when empty); an error status raises LettaError."""
        self._local.http, response = send_over_fresh_connection_if_reset(self._thread_http(), self._new_http, method, path, **kwargs)
        if response.status_code >= 400:
            raise LettaError(f"Letta {method} {path} answered {response.status_code}: {response.text[:500]} "
                             f"(server log: {self.log_path})")
        return response.json() if response.content else None
