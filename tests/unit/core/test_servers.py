"""core.servers.ManagedProcess: health wait, failure messages naming the log, no process left behind."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from core.llm import free_port
from core.servers import ManagedProcess, ServerStartError
from tests.conftest import REPO


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_starts_waits_for_health_and_stops_the_whole_group(tmp_path: Path):
    port = free_port()
    # a parent shell that starts the real server as a child: stop() must end the child too
    child = f"{sys.executable} -m http.server {port} --bind 127.0.0.1"
    server = ManagedProcess("http", ["sh", "-c", f"{child} & wait"], lambda: _port_open(port), tmp_path / "http.log")
    with server:
        assert _port_open(port)
        pid = server.proc.pid
    assert not _alive(pid)
    assert not _port_open(port)


def test_a_server_that_exits_names_its_log(tmp_path: Path):
    server = ManagedProcess("broken", [sys.executable, "-c", "print('boom: bad flag'); raise SystemExit(3)"],
                            lambda: False, tmp_path / "broken.log", start_timeout_s=10)  # fmt: skip
    with pytest.raises(ServerStartError, match=r"exited with code 3.*broken\.log.*boom: bad flag"):
        server.start()


def test_a_server_that_never_answers_is_stopped_and_reported(tmp_path: Path):
    server = ManagedProcess("silent", [sys.executable, "-c", "import time; time.sleep(60)"], lambda: False,
                            tmp_path / "silent.log", start_timeout_s=1.5)  # fmt: skip
    with pytest.raises(ServerStartError, match="did not answer its health check"):
        server.start()
    assert server.proc is None


def test_a_missing_program_says_how_to_install(tmp_path: Path):
    server = ManagedProcess("ghost", ["/nonexistent/ghost-server"], lambda: True, tmp_path / "ghost.log")
    with pytest.raises(ServerStartError, match="cannot run.*setup.sh"):
        server.start()


def test_the_server_ends_when_its_owner_is_killed_without_cleanup(tmp_path: Path):
    """SIGKILL runs no Python code in the owner: the watch loop still takes the server down."""
    import signal
    import subprocess
    import time

    port = free_port()
    owner_code = (
        "import socket, sys, time\n"
        "from core.servers import ManagedProcess\n"
        f"def up():\n    s = socket.socket(); s.settimeout(0.2)\n    r = s.connect_ex(('127.0.0.1', {port})); s.close(); return r == 0\n"
        f"server = ManagedProcess('http', [sys.executable, '-m', 'http.server', '{port}', '--bind', '127.0.0.1'], up, {str(tmp_path / 'h.log')!r})\n"
        "server.start()\n"
        "print('up', flush=True); time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert owner.stdout.readline().strip() == "up"
        assert _port_open(port)
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 20
        while _port_open(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _port_open(port), "the server outlived its SIGKILLed owner"
    finally:
        owner.kill()


def test_unset_env_keeps_an_inherited_variable_from_the_server(tmp_path: Path, monkeypatch):
    """A variable in the caller's shell that would point the server elsewhere (Letta's LETTA_PG_URI) never reaches it."""
    monkeypatch.setenv("SERVER_DB_URI", "postgresql://somewhere-else")
    monkeypatch.setenv("KEPT_VARIABLE", "kept")
    seen = tmp_path / "seen.txt"
    script = f"import os; open({str(seen)!r}, 'w').write(repr((os.environ.get('SERVER_DB_URI'), os.environ.get('KEPT_VARIABLE'))))"
    server = ManagedProcess("env", [sys.executable, "-c", script], lambda: seen.exists(), tmp_path / "env.log",
                            unset_env=("SERVER_DB_URI",), start_timeout_s=10)  # fmt: skip
    try:
        server.start()
    except ServerStartError:
        pass  # the script exits once it has written; only what it saw matters
    finally:
        server.stop()
    assert seen.read_text() == repr((None, "kept"))

