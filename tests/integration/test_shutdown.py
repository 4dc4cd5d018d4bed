"""The first SIGTERM stops a run within 10 s with generations in flight, starts nothing after the signal,
records the invocation's usage and leaves no process behind.

Two shapes, both against a fault server whose generations take minutes (tests/fake_openai_server.py,
``hang``), on the tiny LoCoMo slice of test_faults (conv-26, a dev conversation, session 1):

* ``run.workers=16``: sixteen answer calls in flight at once (``system=rag``);
* Zep (graphiti on the harness's FalkorDB server): graphiti's extraction call in flight on its tapped client;
* the tool-call path: an agent server in its own process (tests/fake_agent.py, Letta's shape: it finishes
  the messages in flight before it exits on SIGTERM, and steps on after a failed step) asks the tool-call
  layer, whose worker thread waits on the LLM.
No real LLM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fake_openai_server import FakeOpenAIServer
from tests.integration.test_faults import REPO, compose_cfg, embed_cache, overrides_for, run_py, tiny_locomo  # noqa: F401 - fixtures
from eval.runner import run_dir_for

pytestmark = pytest.mark.integration

HANG_S = 120.0  # a generation much longer than the 10 s a stop may take
STOP_LIMIT_S = 10.0
# every wait on the server is longer than the generation, so only closing can end it early
SLOW = ["llm.timeout_s=300", "llm.patience_s=600"]


def _wait_for_calls(server: FakeOpenAIServer, n: int, proc: subprocess.Popen, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while server.calls < n and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    if server.calls < n:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"only {server.calls} of {n} calls reached the server: {err[-3000:]}")


def _stop(proc: subprocess.Popen, server: FakeOpenAIServer) -> tuple[float, int, str]:
    """SIGTERM; (seconds to exit, calls that reached the server after the signal, stderr)."""
    calls = server.calls
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=STOP_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"still running {STOP_LIMIT_S:.0f} s after SIGTERM: {err[-3000:]}")
    seconds = time.monotonic() - started
    time.sleep(1.0)  # anything started late would have reached the server by now
    return seconds, server.calls - calls, err


def _recorded(folder: Path) -> dict:
    invocation = json.loads((folder / "provenance.json").read_text())["invocations"][-1]
    assert invocation["ended_by"] == "Terminated" and "llm_usage" in invocation
    assert not (folder / "metrics.json").exists()
    return invocation


def test_sigterm_with_16_generations_in_flight_stops_within_10s(tiny_locomo, tmp_path, embed_cache):  # noqa: F811
    with FakeOpenAIServer(mode="hang", hang_s=HANG_S) as slow:
        overrides = overrides_for(slow.url, tiny_locomo, tmp_path, embed_cache, "run.workers=16", "benchmark.max_questions=16",
                                  "benchmark.evidence_in_ingested_only=false", *SLOW)
        proc = run_py(overrides, popen=True)
        _wait_for_calls(slow, 16, proc)
        seconds, late_calls, err = _stop(proc, slow)
    print(f"\n16 in flight: exit {proc.returncode} after {seconds:.1f} s, {late_calls} calls after the signal")
    assert proc.returncode == 143, err[-3000:]
    assert seconds < STOP_LIMIT_S and late_calls == 0
    _recorded(run_dir_for(compose_cfg(overrides)))


def test_sigterm_with_a_zep_generation_in_flight_stops_within_10s(tiny_locomo, tmp_path, embed_cache):  # noqa: F811
    with FakeOpenAIServer(mode="hang", hang_s=HANG_S) as slow:
        overrides = overrides_for(slow.url, tiny_locomo, tmp_path, embed_cache, "system=zep", *SLOW)
        folder = run_dir_for(compose_cfg(overrides))
        proc = run_py(overrides, popen=True)
        _wait_for_calls(slow, 1, proc)
        assert _falkordb_servers_of(folder), "no FalkorDB server of this run found while it runs"  # the check below can see one
        seconds, late_calls, err = _stop(proc, slow)
    print(f"\nzep: exit {proc.returncode} after {seconds:.1f} s, {late_calls} calls after the signal")
    assert proc.returncode == 143, err[-3000:]
    assert seconds < STOP_LIMIT_S and late_calls == 0
    _recorded(folder)
    assert not _falkordb_servers_of(folder), f"a FalkorDB server of this run is still running: {err[-2000:]}"


def _falkordb_servers_of(folder: Path) -> list[int]:
    """The pids of redis-server processes whose data folder (``--dir``) lies in this run's folder."""
    left = []
    for proc_dir in Path("/proc").iterdir():
        try:
            command = (proc_dir / "cmdline").read_bytes().decode(errors="replace") if proc_dir.name.isdigit() else ""
        except OSError:
            continue
        if "redis-server" in command and str(folder) in command:
            left.append(int(proc_dir.name))
    return left


# run.py's path with a system of the test's own (not a conf/system option): the runner, then run.py's exit
CHILD = """
import sys, json
from omegaconf import OmegaConf, open_dict
from tests.integration.test_faults import compose_cfg
from eval.runner import Terminated, run
from run import exit_now
overrides, system = json.loads(sys.argv[1]), json.loads(sys.argv[2])
cfg = compose_cfg(overrides)
with open_dict(cfg):
    cfg.system = OmegaConf.create(system)
try:
    run(cfg, overrides=overrides)
except Terminated as stop:
    exit_now(int(stop.code))
"""


def test_sigterm_with_a_tool_call_in_flight_stops_within_10s(tiny_locomo, tmp_path, embed_cache):  # noqa: F811
    # the agent server gets ManagedProcess's default 10 s between SIGTERM and SIGKILL: it must stop by itself,
    # which it can only do once its step in flight is answered
    system = {"_target_": "tests.fake_agent.ToolCallingAgent", "name": "fake_agent", "steps": 3, "stop_grace_s": 10.0}
    with FakeOpenAIServer(mode="hang", hang_s=HANG_S) as slow:
        overrides = overrides_for(slow.url, tiny_locomo, tmp_path, embed_cache, *SLOW)
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(overrides), json.dumps(system)], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_calls(slow, 1, proc)
        seconds, late_calls, err = _stop(proc, slow)
    print(f"\ntool-call path: exit {proc.returncode} after {seconds:.1f} s, {late_calls} calls after the signal")
    assert proc.returncode == 143, err[-3000:]
    assert seconds < STOP_LIMIT_S and late_calls == 0
    assert "did not stop within" not in err  # stopped by itself, not killed
    cfg = compose_cfg(overrides)
    folder = next((tmp_path / "results" / "runs" / "locomo" / "fake_agent").glob("*/*"))
    assert folder.parent.name == str(cfg.ablation_name)
    _recorded(folder)
    agent_log = (folder / "system" / "fake_agent.log").read_text()
    pid = int(agent_log.split("pid ")[1].split()[0])
    with pytest.raises(ProcessLookupError):  # the agent server is gone, not left to its owner-watch loop
        os.kill(pid, 0)


# run.py's path with the local model's loader replaced by one that holds the GIL, as xllamacpp's Server() does for the
# whole of llama.cpp's model load (its constructor has no `nogil` section): no Python code, the signal handler
# included, runs in any thread until it returns. The "model" it loads then serves from the fault server.
SLOW_LOAD_CHILD = """
import ctypes, json, signal, sys, types
from pathlib import Path
overrides, url, marker, load_s = json.loads(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])

class Params:  # xllamacpp.CommonParams: nested settings, any of which may be set
    def __getattr__(self, name):
        value = Params()
        object.__setattr__(self, name, value)
        return value

class Server:
    def __init__(self, params):
        marker.write_text("loading")
        # a C call made with the GIL held that a signal does not cut short (a bare sleep() returns on one)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        ctypes.PyDLL(None).sleep(load_s)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        self.listening_address = url

sys.modules["xllamacpp"] = types.ModuleType("xllamacpp")
sys.modules["xllamacpp"].CommonParams, sys.modules["xllamacpp"].Server = Params, Server
import core.model_files
core.model_files.resolve_model = lambda spec, **kwargs: Path("/stub/model.gguf")
from tests.integration.test_faults import compose_cfg
from eval.runner import Terminated, run
from run import exit_now
try:
    run(compose_cfg(overrides), overrides=overrides)
except Terminated as stop:
    exit_now(int(stop.code))
"""
LOAD_S = 5


@pytest.mark.parametrize("workers", [1, 4])
def test_one_sigterm_while_the_local_model_loads_stops_the_run(tiny_locomo, tmp_path, embed_cache, workers):  # noqa: F811
    """The first SIGTERM is acted on as soon as the load returns (it cannot be earlier: the handler needs the GIL),
    the loaded model is never asked, and no second signal is needed. ``workers=4``: a worker thread loads the model
    while the main thread waits, the shape of MemGPT's tool-call layer."""
    with FakeOpenAIServer(mode="hang", hang_s=HANG_S) as slow:
        overrides = [o for o in overrides_for(slow.url, tiny_locomo, tmp_path, embed_cache, f"run.workers={workers}")
                     if not o.startswith("llm")] + ["llm=local", "llm.model=stub", "llm.timeout_s=300"]
        marker = tmp_path / "load"
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-c", SLOW_LOAD_CHILD, json.dumps(overrides), slow.url, str(marker), str(LOAD_S)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not marker.exists():
            proc.kill()
            pytest.fail(f"the model load never started: {proc.communicate()[1][-3000:]}")
        calls = slow.calls
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # once
        try:
            _, err = proc.communicate(timeout=LOAD_S + STOP_LIMIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"still running {LOAD_S + STOP_LIMIT_S} s after one SIGTERM during the load: {proc.communicate()[1][-3000:]}")
        seconds = time.monotonic() - started
        time.sleep(1.0)
        late_calls = slow.calls - calls
    print(f"\nSIGTERM during the model load (workers={workers}): exit {proc.returncode} after {seconds:.1f} s "
          f"(load {LOAD_S} s), {late_calls} calls after the signal")
    assert proc.returncode == 143, err[-3000:]
    assert LOAD_S - 1 < seconds < LOAD_S + STOP_LIMIT_S and late_calls == 0  # not before the load returned, soon after
    _recorded(run_dir_for(compose_cfg(overrides)))
