"""The Letta server (baselines/letta_server.py): its environment is built on first use of system=memgpt, not by the
set-up; its SQLite schema is repaired on start; a reset connection or a server error never reuses the old client."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import httpx
import pytest

from baselines.letta_server import ensure_letta, fix_archives_agents_default, send_over_fresh_connection_if_reset
from tests.conftest import REPO


def fake_setup(root: Path, body: str) -> Path:
    """A stand-in for scripts/setup_letta.sh under ``root``/scripts, counting its runs in ``root``/runs."""
    script = root / "scripts" / "setup_letta.sh"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!/usr/bin/env bash\nset -e\necho run >> runs\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_missing_managed_env_is_built_once(tmp_path):
    script = fake_setup(tmp_path, "mkdir -p .venv-letta/bin && touch .venv-letta/bin/letta")
    managed = tmp_path / ".venv-letta" / "bin" / "letta"
    ensure_letta(str(managed), setup_script=script, managed=managed)
    assert managed.exists()
    ensure_letta(str(managed), setup_script=script, managed=managed)  # present: nothing is run again
    assert (tmp_path / "runs").read_text().count("run") == 1


def test_failed_build_names_its_log(tmp_path):
    script = fake_setup(tmp_path, "exit 7")
    managed = tmp_path / ".venv-letta" / "bin" / "letta"
    with pytest.raises(RuntimeError, match=r"exit 7.*\.venv-letta-setup\.log"):
        ensure_letta(str(managed), setup_script=script, managed=managed)


def test_user_install_elsewhere_is_never_built(tmp_path):
    script = fake_setup(tmp_path, "exit 0")
    with pytest.raises(FileNotFoundError, match="system.letta_bin"):
        ensure_letta(str(tmp_path / "elsewhere" / "letta"), setup_script=script, managed=tmp_path / ".venv-letta" / "bin" / "letta")
    assert not (tmp_path / "runs").exists()


def test_setup_builds_letta_only_when_asked():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    build_lines = [line for line in setup.splitlines() if "setup_letta.sh" in line and not line.lstrip().startswith("#")]
    assert build_lines and all(line.startswith("  ") for line in build_lines), "setup.sh must build Letta only under --with-letta"
    assert '"${1:-}" = "--with-letta"' in setup


# The table as Letta 0.11.7 creates it on SQLite (copied from a fresh server's sqlite.db)
LETTA_DDL = """CREATE TABLE archives_agents (
\tagent_id VARCHAR NOT NULL,
\tarchive_id VARCHAR NOT NULL,
\tcreated_at DATETIME DEFAULT 'now()' NOT NULL,
\tis_owner BOOLEAN NOT NULL,
\tPRIMARY KEY (agent_id, archive_id),
\tCONSTRAINT unique_agent_archive UNIQUE (agent_id)
)"""


def test_schema_fix_rebuilds_the_table_with_a_real_default_and_keeps_rows(tmp_path):
    db = tmp_path / "sqlite.db"
    with sqlite3.connect(db) as con:
        con.execute(LETTA_DDL)
        con.execute("INSERT INTO archives_agents VALUES ('a1', 'r1', '2024-01-01 00:00:00', 1)")
        con.execute("INSERT INTO archives_agents (agent_id, archive_id, is_owner) VALUES ('a2', 'r2', 1)")
        broken = con.execute("SELECT created_at FROM archives_agents WHERE agent_id='a2'").fetchone()[0]
    assert broken == "now()"  # the bug: a literal string that Letta cannot parse as a date

    assert fix_archives_agents_default(db) is True
    with sqlite3.connect(db) as con:
        sql = con.execute("SELECT sql FROM sqlite_master WHERE name='archives_agents'").fetchone()[0]
        con.execute("INSERT INTO archives_agents (agent_id, archive_id, is_owner) VALUES ('a3', 'r3', 1)")
        rows = dict(con.execute("SELECT agent_id, created_at FROM archives_agents").fetchall())
        with pytest.raises(sqlite3.IntegrityError):  # the UNIQUE constraint survived the rebuild
            con.execute("INSERT INTO archives_agents (agent_id, archive_id, is_owner) VALUES ('a3', 'r4', 1)")
    assert "CURRENT_TIMESTAMP" in sql and "now()" not in sql
    assert rows["a1"] == "2024-01-01 00:00:00" and set(rows) == {"a1", "a2", "a3"}
    assert rows["a3"][:2] == "20" and rows["a3"] != "now()"
    assert fix_archives_agents_default(db) is False  # idempotent


def test_schema_fix_names_the_missing_table(tmp_path):
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(RuntimeError, match="archives_agents"):
        fix_archives_agents_default(tmp_path / "empty.db")


class _Server:
    """A stand-in for Letta's HTTP side: resets the first request on a client, or answers 500 once."""

    def __init__(self, reset_first: bool = False, fail_first_post: bool = False) -> None:
        self.reset_first, self.fail_first_post = reset_first, fail_first_post
        self.seen: list[str] = []
        self.clients = 0

    def client(self) -> httpx.Client:
        self.clients += 1
        generation = self.clients

        def handle(request: httpx.Request) -> httpx.Response:
            self.seen.append(f"{generation}:{request.method}")
            if self.reset_first and generation == 1:
                raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
            if self.fail_first_post and request.method == "POST" and generation == 1:
                return httpx.Response(500, json={"detail": "An internal server error occurred"})
            return httpx.Response(200, json={"ok": generation})

        return httpx.Client(base_url="http://letta.test", transport=httpx.MockTransport(handle))


def test_a_reset_get_is_sent_once_more_on_a_new_connection() -> None:
    server = _Server(reset_first=True)
    http, response = send_over_fresh_connection_if_reset(server.client(), server.client, "GET", "/v1/agents/a/archival-memory")
    assert response.json() == {"ok": 2}
    assert server.seen == ["1:GET", "2:GET"]
    assert http.request("GET", "/x").json() == {"ok": 2}  # later requests go through the new client


def test_a_reset_post_is_never_sent_twice() -> None:
    server = _Server(reset_first=True)
    with pytest.raises(httpx.ReadError):
        send_over_fresh_connection_if_reset(server.client(), server.client, "POST", "/v1/agents/a/messages", json={})
    assert server.seen == ["1:POST"]


def test_after_a_server_error_the_next_request_uses_a_new_connection() -> None:
    server = _Server(fail_first_post=True)
    http, response = send_over_fresh_connection_if_reset(server.client(), server.client, "POST", "/v1/agents/a/messages", json={})
    assert response.status_code == 500  # returned to the caller, which reports the failed turn
    http, response = send_over_fresh_connection_if_reset(http, server.client, "GET", "/v1/agents/a/archival-memory")
    assert response.json() == {"ok": 2}
    assert server.seen == ["1:POST", "2:GET"]


FAKE_LETTA = '''
import json, os, sqlite3, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

if "LETTA_PG_URI" in os.environ:  # the run's store must be the SQLite file under HOME, never a shell's Postgres
    raise SystemExit("LETTA_PG_URI reached the server")
db = os.path.join(os.environ["HOME"], ".letta", "sqlite.db")
os.makedirs(os.path.dirname(db), exist_ok=True)
with sqlite3.connect(db) as con:
    con.execute(sys.argv[-1])


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        status = {"/v1/health/": 200, "/v1/agents/a1": 200}.get(self.path, 404)
        body = json.dumps({"id": "a1"} if status == 200 else {"detail": "no such agent"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer((sys.argv[3], int(sys.argv[5])), Handler).serve_forever()
'''


def test_the_server_starts_with_home_in_the_run_folder_repairs_its_schema_answers_and_stops(tmp_path, monkeypatch):
    """A stand-in ``letta server`` (same command line, HOME and health check) under LettaServer's lifecycle; a
    LETTA_PG_URI in the caller's shell does not reach it (the stand-in exits if it does)."""
    import sys

    monkeypatch.setenv("LETTA_PG_URI", "postgresql://someone-elses-database")

    from baselines.letta_server import LettaError, LettaServer

    script = tmp_path / "fake_letta.py"
    script.write_text(FAKE_LETTA)
    letta = tmp_path / "letta"
    letta.write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" "{script}" "$@" "{LETTA_DDL}"\n')
    letta.chmod(letta.stat().st_mode | stat.S_IXUSR)
    server = LettaServer(str(letta), tmp_path / "run", start_timeout_s=30, request_timeout_s=10, stop_grace_s=3)
    assert not server.running and server.start_s is None and server.schema_fixed is False
    server.start()
    try:
        assert server.running and server.base_url.startswith("http://127.0.0.1:")
        assert server.schema_fixed is True  # the stand-in made Letta 0.11.7's table under HOME=<run>/letta_home
        assert (tmp_path / "run" / "letta_home" / ".letta" / "sqlite.db").exists()
        assert server.request("GET", "/v1/agents/a1") == {"id": "a1"}
        with pytest.raises(LettaError, match=r"404.*letta_server\.log"):
            server.request("GET", "/v1/agents/gone")
    finally:
        server.close_clients()
        process = server.process
        server.stop()
    assert not server.running and server.process is None and not process.running


def test_the_server_is_not_running_for_other_threads_until_its_start_has_returned(tmp_path):
    """With namespaces written at once, the adapter starts Letta once (a lock and a ``running`` check): a thread that
    saw the process spawned as running sent its first request while the server was still booting (connection refused)."""
    import sys
    import threading
    import time

    from baselines.letta_server import LettaServer

    script = tmp_path / "slow_letta.py"
    script.write_text("import time\ntime.sleep(2)  # Letta boots for seconds before its port answers\n" + FAKE_LETTA)
    letta = tmp_path / "letta"
    letta.write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" "{script}" "$@" "{LETTA_DDL}"\n')
    letta.chmod(letta.stat().st_mode | stat.S_IXUSR)
    server = LettaServer(str(letta), tmp_path / "run", start_timeout_s=30, request_timeout_s=10, stop_grace_s=3)
    starting = threading.Thread(target=server.start)
    starting.start()
    try:
        deadline = time.monotonic() + 10
        while not (server.process is not None and server.process.running) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.process is not None and server.process.running  # spawned, still booting
        assert not server.running  # what another thread sees: not yet
        starting.join(30)
        assert server.running and server.request("GET", "/v1/agents/a1") == {"id": "a1"}
    finally:
        starting.join(30)
        server.close_clients()
        server.stop()
    assert not server.running
