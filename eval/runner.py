"""Run one table cell: build the objects a config names, run the benchmark, write the record.

The run folder is ``results/runs/<benchmark>/<system>/<ablation>/<config-hash>/``; the same
command reuses it, so a killed run resumes (benchmarks append rows as they go). metrics.json
is written atomically at the end with the metadata every table needs.

A run is finished when metrics.json exists *and* no row failed: benchmarks report
``failures: {rows, ingest_turns}``, a rerun of the same command redoes only the failed rows (a short
server outage never becomes a permanent result), and run.py exits ``FAILURES_EXIT`` while any remain.
SIGTERM unwinds like Ctrl-C, so the invocation's LLM usage is recorded in provenance.json.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from core.api import HarnessError, InputChecked, LLMUsage, ReportsMetrics, ReportsRunMetadata
from core.config_check import check_config
from eval import config_checks
from eval.context import RunContext
from eval.judge import build_judge, calls_judge, judge_prompt_of, judge_settings
from eval.loggers import client_usage, progress_hook
from eval.record import RECORD_VERSION, ProvenanceRecord, RecordedMetrics, RunMetrics, load_metrics, write_record
from eval.provenance import Provenance, code_label, code_version, combined_input_hash, expected_inputs, input_hashes, same_code
from eval.run_lock import LOCK_NAME, SIDECAR_NAME, RunLock
from eval.tables import to_markdown

log = logging.getLogger("mosaic_bench")

# Keys that do not change what a run computes, so they stay out of the config hash.
NON_SEMANTIC_KEYS = ("logger", "results_dir", "cache_dir", "hydra", "overwrite", "resume", "run")
# Per-client keys that say where or how patiently to reach a server, not what it computes: a server on
# another port (base_url) or a longer timeout can resume a run.
TRANSPORT_KEYS = ("cache_path", "verbosity", "flash_attn", "base_url", "api_key_env", "timeout_s", "patience_s",
                  "max_retries", "retry_wait_s", "health_timeout_s", "remember_output_faults")  # fmt: skip


# run.py's exit status when a run ended with failed rows or failed ingest (documented in the README); not 2
# (a user's error, before any run folder) and not 1 (a crash)
FAILURES_EXIT = 3
# config blocks validate() checks against their constructors before the run folder exists
CHECKED_BLOCKS = ("system", "benchmark", "embedder", "answerer", "llm", "judge.llm", "logger")
# keys whose values become folder names under results_dir: one plain path component each, so no value
# (``..``, an absolute path, a newline, 300 characters) can put a run outside results_dir or fail mkdir
FOLDER_NAME_KEYS = ("benchmark.name", "system.name", "ablation_name")
FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=,-]{0,99}")


class ConfigError(HarnessError, ValueError):
    """A configuration that cannot run; the message says what to fix."""


class Terminated(SystemExit):
    """SIGTERM, raised in the main thread like Ctrl-C, so every ``finally`` runs (usage recorded, lock freed)."""


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Turn the first SIGTERM into ``Terminated`` (exit status 143) and the first Ctrl-C into KeyboardInterrupt
    while the block runs; a second signal of either kind kills at once (both defaults are back in place as
    soon as the first arrives). The unwinding closes the system and the LLM clients (``close_in_call_order``),
    which abort what is in flight, so the first signal ends the run within seconds."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return

    def unwind(signum: int, _frame: Any) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_DFL)
        name = signal.Signals(signum).name
        log.warning("%s: stopping; this invocation's LLM usage is recorded in provenance.json, rerun to resume (a second signal kills at once)", name)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(128 + signum)

    # a SIGINT the shell told us to ignore (a background job of a non-interactive shell) stays ignored
    signals = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else [])
    previous = {sig: signal.signal(sig, unwind) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def close_in_call_order(system: Any, *clients: Any) -> None:
    """Close the system first (it stops the servers it started: Letta, FalkorDB, the tool-call layer, which
    could otherwise ask for more generations), then each LLM client once (a closed client refuses calls and
    aborts the ones in flight). A close that fails is logged; the others still run."""
    seen: set[int] = set()
    for part in (system, *clients):
        close = getattr(part, "close", None)
        if part is None or id(part) in seen or not callable(close):
            continue
        seen.add(id(part))
        try:
            close()
        except Exception as err:  # noqa: BLE001 - one failed close must not keep the rest running
            log.warning("closing %s failed: %s", type(part).__name__, err)


def failed_rows(metrics: dict[str, Any] | RecordedMetrics) -> int:
    """Rows whose LLM call failed, as the benchmark counted them (0 for runs from before the count existed)."""
    return RecordedMetrics.of(metrics).failed_rows


def failure_line(metrics: dict[str, Any] | RecordedMetrics) -> str | None:
    """One line saying what failed and what a rerun does, or None for a run without failures."""
    failures = RecordedMetrics.of(metrics).failures
    rows, turns = (failures.rows, failures.ingest_turns) if failures else (0, 0)
    if not rows and not turns:
        return None
    parts = [f"{rows} rows failed (an LLM call gave no usable output): rerunning the same command retries only those"] if rows else []
    if turns:
        parts.append(f"the system reported {turns} failed ingest writes (kept: every row was computed on that memory; overwrite=true redoes the run)")
    return f"run finished with failures: {'; '.join(parts)} (metrics.json `failures`)"


def semantic_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config minus where-things-go keys: what the config hash is taken over."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)
    for key in NON_SEMANTIC_KEYS:
        raw.pop(key, None)
    if not calls_judge(cfg.get("benchmark")):  # a benchmark that never asks the judge: which judge is configured changes nothing it computes
        raw.pop("judge", None)
    # cache paths, log levels, server addresses and patience and the attention kernel are where/how, not
    # what (a kernel can move the last bits of a logit, which the response cache, keyed by the request, does
    # not tell apart either)
    for group in ("llm", "judge", "embedder"):
        for key in TRANSPORT_KEYS:
            _drop_key(raw.get(group), key)
    resolved = OmegaConf.to_container(OmegaConf.create(raw), resolve=True, throw_on_missing=False)
    assert isinstance(resolved, dict)
    return resolved


def _drop_key(node: Any, key: str) -> None:
    if isinstance(node, dict):
        node.pop(key, None)
        for value in node.values():
            _drop_key(value, key)


def config_hash(cfg: DictConfig, inputs: dict[str, str] | None = None) -> str:
    """Identity of a run: the semantic config plus the content hash of every input file (eval.provenance)."""
    identity = {"config": semantic_config(cfg), "inputs": input_hashes(cfg) if inputs is None else inputs}
    canonical = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def validate(cfg: DictConfig) -> None:
    """Fail early with messages that say what to fix."""
    for group in ("system", "benchmark", "llm"):
        if group not in cfg or cfg[group] is None:
            raise ConfigError(f"no `{group}` chosen: add e.g. `{group}=...` (see conf/{group}/)")
        if "_target_" not in cfg[group]:
            raise ConfigError(f"conf/{group}: missing `_target_` (the class to build)")
    missing = {f"{key}.{inner}" for key in cfg if key != "hydra" and isinstance(cfg[key], DictConfig) for inner in OmegaConf.missing_keys(cfg[key])}
    if missing:
        raise ConfigError(f"these config values must be set (they are ???): {sorted(missing)}; e.g. `llm.base_url=http://host:port`")
    for name in ("name",):
        if name not in cfg.system or name not in cfg.benchmark:
            raise ConfigError(f"conf/system and conf/benchmark files need a `{name}` key (used in the results path)")
    for key in FOLDER_NAME_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        if not isinstance(value, str) or not FOLDER_NAME.fullmatch(value):
            raise ConfigError(f"{key}={value!r}: must be a folder name of 1-100 letters, digits and . _ - + = , starting with a "
                              f"letter or digit (it is part of the run folder's path under results_dir), e.g. {key}=none")
    bad = config_checks.problems(cfg)
    if bad:
        raise ConfigError("; ".join(bad))
    if "judge" not in cfg or cfg.judge is None:
        raise ConfigError("no `judge` chosen: add e.g. `judge=same` (see conf/judge/)")
    try:
        judge_settings(cfg.judge)  # every setting of the judge's class present and none it would ignore
        judge_prompt_of(cfg.judge)  # the judge's prompt (conf/judge/prompt/) is whole before any run folder
    except ValueError as err:
        raise ConfigError(str(err)) from err
    # each block against the constructor it builds (unknown keys, types and ranges: its parameters' annotations)
    # and its CONFIG_RULES, here, once, before any run folder, rather than when the object is built
    for dotted in CHECKED_BLOCKS:
        block = OmegaConf.select(cfg, dotted, default=None)
        if isinstance(block, DictConfig) and "_target_" in block:
            plain = OmegaConf.to_container(block, resolve=True)
            assert isinstance(plain, dict)
            check_config(plain, dotted)


def write_provenance(path: Path, record: dict[str, Any]) -> None:
    """provenance.json through its typed record (eval.record), indented, never half written."""
    write_record(path, ProvenanceRecord.of(record))


def run_dir_for(cfg: DictConfig, inputs: dict[str, str] | None = None) -> Path:
    """``<results_dir>/runs/<benchmark>/<system>/<ablation>/<config hash>``; a folder-name key that would leave
    results_dir (validate() refuses them first) fails here too, before any folder is made."""
    names = [str(cfg.benchmark.name), str(cfg.system.name), str(cfg.ablation_name)]
    bad = [name for name in names if not FOLDER_NAME.fullmatch(name)]
    if bad:
        raise ConfigError(f"{bad[0]!r} is not a plain folder name: benchmark.name, system.name and ablation_name must stay under results_dir")
    return Path(cfg.results_dir).joinpath("runs", *names, config_hash(cfg, inputs))


def read_metrics(path: Path) -> dict[str, Any]:
    """metrics.json read through the run record (eval.record), as the dict benchmarks' tables take."""
    return load_metrics(path).dump()


def clear_run_dir(run_dir: Path) -> None:
    """Remove everything a previous run left, except the lock this process holds."""
    for child in run_dir.iterdir():
        if child.name in (LOCK_NAME, SIDECAR_NAME):
            continue
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def add_usage(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Sum of two LLMUsage dicts (calls, tokens, by purpose)."""
    out = json.loads(json.dumps(total))
    for key, value in more.items():
        if key == "by_purpose":
            for purpose, counts in value.items():
                bucket = out.setdefault("by_purpose", {}).setdefault(purpose, {})
                for name, n in counts.items():
                    bucket[name] = bucket.get(name, 0) + n
        elif isinstance(value, int | float):
            out[key] = out.get(key, 0) + value
    return out


def check_credentials(*clients: Any) -> None:
    """An API key missing from the environment fails here, before any ingest."""
    for client in clients:
        check = getattr(client, "check_credentials", None)
        if callable(check):
            check()


def latency_summary(latencies_s: list[float]) -> dict[str, float | int]:
    if not latencies_s:
        return {"n": 0}
    import numpy as np  # here, not at the top: a rerun of a finished run never needs it

    values = np.asarray(latencies_s)
    return {"n": int(values.size), "p50_s": float(np.percentile(values, 50)), "p95_s": float(np.percentile(values, 95)), "mean_s": float(values.mean())}


def build_system(cfg: DictConfig, llm: Any, embedder: Any, run_dir: Path) -> Any:
    # absolute: results_dir is relative to the start folder, and systems start servers in folders of their
    # own (Letta runs with its home as cwd and HOME), where a relative path would name another place
    workdir = (run_dir / "system").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    system_cfg = OmegaConf.to_container(cfg.system, resolve=True)
    assert isinstance(system_cfg, dict)
    # its keys, types, ranges and rules were checked once, by validate(), before the run folder existed
    return instantiate(system_cfg, llm=llm, embedder=embedder, workdir=str(workdir), _convert_="all")


def check_inputs(cfg: DictConfig) -> tuple[Any, Any]:
    """Build what is cheap to build (the benchmark, the embedder: no model, no server, no LLM) and read the
    inputs, so a bad data file, slice or cache file fails with its one-line error before the run folder exists.

    Returns (benchmark, embedder): the run uses these very objects, so each is built once. A benchmark that
    implements ``InputChecked`` parses its files and checks its slice here.
    """
    benchmark = instantiate(cfg.benchmark, _convert_="all")
    if isinstance(benchmark, InputChecked):
        benchmark.check_inputs()
    return benchmark, instantiate(cfg.embedder)


def run(cfg: DictConfig, overrides: list[str] | None = None) -> dict[str, Any]:
    """Run the configured benchmark on the configured system and return metrics (also on disk)."""
    validate(cfg)
    inputs = input_hashes(cfg)
    run_dir = run_dir_for(cfg, inputs)
    built = None  # a finished run's inputs were checked when it ran (its folder is named for their content), and it builds nothing
    if not _finished_cleanly(cfg, run_dir):
        built = check_inputs(cfg)
    created = [p for p in [run_dir, *run_dir.parents] if not p.exists()]  # folders this call makes, deepest first
    with sigterm_unwinds(), RunLock(run_dir):  # a folder another process holds fails here, before anything below
        try:
            metrics = _run_locked(cfg, overrides, run_dir, inputs, built=built)
        except BaseException:
            if created:
                _remove_unstarted(run_dir, created)
            raise
    return metrics


def _finished_cleanly(cfg: DictConfig, run_dir: Path) -> bool:
    metrics_path = run_dir / "metrics.json"
    return not cfg.overwrite and metrics_path.is_file() and not failed_rows(read_metrics(metrics_path))


def _remove_unstarted(run_dir: Path, created: list[Path]) -> None:
    """A run folder this call created, left holding only its lock (nothing recorded: a failure before
    provenance.json, e.g. an LLM that would not start, a missing API key or a full disk), is removed with
    the empty parents this call made: no orphan folders. A folder with any record in it is kept for the
    resume. Called while this process still holds the lock (nobody waits on it: RunLock never waits)."""
    try:
        left = {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else set()
        if left - {LOCK_NAME, SIDECAR_NAME}:
            return
        for name in left:
            (run_dir / name).unlink(missing_ok=True)
        for folder in created:  # deepest first
            folder.rmdir()
    except OSError:
        pass  # another process made something here meanwhile: leave it


def _run_locked(cfg: DictConfig, overrides: list[str] | None, run_dir: Path, inputs: dict[str, str],
                built: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The run inside its lock; ``built``: the (benchmark, embedder) check_inputs built and checked (None: build them)."""
    metrics_path = run_dir / "metrics.json"
    code = code_version()
    finished = read_metrics(metrics_path) if metrics_path.exists() and not cfg.overwrite else None
    if finished is not None and failed_rows(finished):
        log.info("%s has %d failed rows: resuming to retry them (the other rows are kept)", metrics_path, failed_rows(finished))
    elif finished is not None:
        log.info("this configuration already finished; reading %s (overwrite=true to redo)", metrics_path)
        finished_code = RecordedMetrics.of(finished).metadata.code_at_end
        if finished_code and not same_code(finished_code, code):
            log.warning("%s was computed under code %s; the code is now %s (overwrite=true recomputes it)",
                        metrics_path, code_label(finished_code), code_label(code))  # fmt: skip
        # table.md is a function of metrics.json and the code: written by this same code, it is printed as it is,
        # so a rerun of a finished run imports no table code (pandas); other code rebuilds it
        same = bool(finished_code) and same_code(finished_code, code)
        _finish(cfg, run_dir, finished, log_external=False, table_on_disk=same)
        return finished
    if cfg.overwrite and any(p.name not in (LOCK_NAME, SIDECAR_NAME) for p in run_dir.iterdir()):
        log.info("overwrite=true: clearing %s (the LLM cache still makes the redo cheap)", run_dir)
        clear_run_dir(run_dir)
    allow_code_change = bool(OmegaConf.select(cfg, "resume.allow_code_change", default=False))
    provenance = Provenance(run_dir)
    provenance.check_resume(code, allow_code_change)
    started = time.time()
    llm = instantiate(cfg.llm)
    judge = build_judge(cfg.judge, llm)  # conf/judge: its client (or `llm`), prompt, max_tokens, attempts
    judge_llm = judge.llm
    check_credentials(llm, judge_llm)  # before anything is recorded or computed
    faults_asked_again = retry_output_faults(finished, llm, judge_llm)
    record = provenance.start(code, inputs, allow_code_change, write_provenance)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    (run_dir / "overrides.json").write_text(json.dumps(overrides or [], indent=2))
    log.info("run folder: %s (code %s)", run_dir, code_label(code))
    benchmark, embedder = built or (instantiate(cfg.benchmark, _convert_="all"), instantiate(cfg.embedder))
    answerer = instantiate(cfg.answerer, llm=llm)
    system: Any = None  # its counters are recorded with the invocation, however it ends
    ctx: RunContext | None = None
    try:
        system = build_system(cfg, llm, embedder, run_dir)
        ctx = RunContext(run_dir=run_dir, llm=llm, judge=judge, workers=int(cfg.run.workers), embedder=embedder, answerer=answerer,
                         log=log, input_hash=combined_input_hash(inputs), inputs=expected_inputs(cfg, inputs))  # fmt: skip
        ctx.progress = progress_hook(instantiate(cfg.logger), run_dir, semantic_config(cfg), client_usage(llm, judge_llm))  # W&B while it runs
        if isinstance(system, ReportsRunMetadata):  # how the system was set up for this run (core.api.ReportsRunMetadata)
            ctx.extra_metadata["system_metadata"] = system.run_metadata()
        metrics = benchmark.run(system, ctx)
        earlier = record["invocations"][:-1]
        if isinstance(system, ReportsMetrics):  # the system's own counters; the runner's, whatever the benchmark
            metrics["system_metrics"] = kept_system_metrics(earlier, system.metrics(), ctx.system_did_work)
        if "system_metrics" in metrics:
            metrics["system_metrics_scope"] = system_metrics_scope(len(record["invocations"]))
        code_at_end = code_version()
        llm_usage_now = llm.usage.__dict__
        judge_usage_now = judge_llm.usage.__dict__ if judge_llm is not llm else None
        metrics["metadata"] = {
            "schema_version": RECORD_VERSION,
            "git_sha": code_label(code_at_end),
            "git_sha_start": code_label(record["code_at_start"]),
            "git_dirty": bool(record["code_at_start"].get("dirty") or code_at_end.get("dirty")),
            "code_at_start": record["code_at_start"],
            "code_at_end": code_at_end,
            "code_changed_during_run": not same_code(record["code_at_start"], code_at_end),
            "resume_allow_code_change": allow_code_change,
            "input_files": inputs,
            "input_hash": ctx.input_hash,
            "benchmark": str(cfg.benchmark.name),
            "benchmark_target": str(cfg.benchmark._target_),
            "system": str(cfg.system.name),
            "system_target": str(cfg.system._target_),
            "ablation": str(cfg.ablation_name),
            "config_hash": run_dir.name,
            "llm_model_id": llm.model_id,
            "judge_model_id": judge_llm.model_id,
            "embedder_model_id": getattr(embedder, "model_id", "unknown"),
            # over every invocation of this run folder (a killed run's calls are counted when it ended cleanly
            # enough to record them: errors and Ctrl-C yes, kill -9 no)
            "llm_usage": _summed(earlier, "llm_usage", llm_usage_now),
            "llm_usage_this_invocation": llm_usage_now,
            "invocations": len(record["invocations"]),
            # earlier invocations that ended without recording their usage (kill -9, power loss): llm_usage
            # undercounts by their calls
            "invocations_without_usage": sum("llm_usage" not in entry for entry in earlier),
            "llm_call_latency": latency_summary(getattr(getattr(llm, "meter", None), "latencies_s", [])),
            "judge_usage": _summed(earlier, "judge_usage", judge_usage_now) if judge_usage_now else "same client as llm",
            "overrides": overrides or [],
            "output_faults_asked_again": faults_asked_again,
            "finished_at": datetime.now(timezone.utc).isoformat(),
            "wall_s_this_invocation": round(time.time() - started, 2),
            **ctx.extra_metadata,
        }
        write_record(metrics_path, RunMetrics.of(metrics).check_complete())  # typed and complete before it is kept
        ended_by = "finished"
    except BaseException as err:  # recorded, then raised as it was
        ended_by = type(err).__name__
        raise
    finally:
        try:
            close_in_call_order(system, llm, judge_llm)
        finally:
            try:
                _record_invocation(provenance, llm, judge_llm, started, ended_by, system, ctx is None or ctx.system_did_work)
            except OSError as err:
                if ended_by == "finished":
                    raise
                # the error that stopped the run (say, a row file on a full disk) is the one to report, not this record
                log.warning("could not record this invocation's usage in %s (%s)", provenance.path, err)
    _finish(cfg, run_dir, metrics, log_external=True)
    return metrics


def retry_output_faults(finished: dict[str, Any] | None, *clients: Any) -> bool:
    """On the rerun of a finished run with failed rows, have the clients ask a remembered output fault (a cut-off or
    schema-breaking greedy reply, core/llm/client.py) again instead of replaying it: the failure line promises
    that a rerun retries the failed rows, and a fault remembered from a broken server would fail them again at
    no cost forever. True when it did (recorded in metrics.json: the rerun's replies, ingest's too, may differ
    from the first run's where those were faults)."""
    if finished is None or not failed_rows(finished):
        return False
    for client in {id(c): c for c in clients}.values():
        if getattr(client, "remember_output_faults", False):
            client.remember_output_faults = False
    log.info("retrying %d failed rows: remembered output faults are asked again this time", failed_rows(finished))
    return True


def _summed(invocations: list[dict[str, Any]], field: str, now: dict[str, Any]) -> dict[str, Any]:
    total: dict[str, Any] = LLMUsage().__dict__
    for entry in invocations:
        total = add_usage(total, entry.get(field) or {})
    return add_usage(total, now)


def system_metrics_scope(invocations: int) -> str:
    """What a run's ``system_metrics`` (the system's own counters: its writes, its mechanisms) cover. The
    counters live in the process: a resumed run's cover the invocation that last ingested or predicted, whose
    work depends on where the earlier one stopped (it may redo an unfinished unit, or skip finished ones), so
    they are comparable with an uninterrupted run's only when the run had one invocation. Each invocation's
    counters are kept in provenance.json (``invocations[i].system_metrics``)."""
    if invocations <= 1:
        return "whole run (one invocation)"
    return (f"last invocation that ingested or predicted, of {invocations}: not the whole run's counters (a resumed run); "
            "each invocation's are in provenance.json; overwrite=true recomputes them in one invocation")


def kept_system_metrics(earlier: list[dict[str, Any]], now: dict[str, Any], did_work: bool) -> dict[str, Any]:
    """The system's counters a run reports: this invocation's when it used the system, else those of the last
    earlier invocation that did (provenance.json keeps each one's), so a resume that only judged reports the
    counters of the work it judged. Invocations recorded before ``system_did_work`` existed count as unknown."""
    if did_work:
        return now
    worked = [entry["system_metrics"] for entry in earlier if entry.get("system_did_work") and entry.get("system_metrics") is not None]
    return worked[-1] if worked else now


def _record_invocation(provenance: Provenance, llm: Any, judge_llm: Any, started: float, ended_by: str, system: Any = None,
                       system_did_work: bool = True) -> None:  # fmt: skip
    """Write this invocation's usage (and the system's own counters, when it has them, with whether it used the
    system) into provenance.json, so a resumed run's totals include it; ``ended_by``: "finished", or the exception
    that ended it (``Terminated`` for SIGTERM, ``KeyboardInterrupt``, ...)."""
    record = provenance.load()
    if record is None or not record.get("invocations"):
        return
    record["invocations"][-1].update(
        llm_usage=llm.usage.__dict__, judge_usage=judge_llm.usage.__dict__ if judge_llm is not llm else None,
        wall_s=round(time.time() - started, 2), ended_at=datetime.now(timezone.utc).isoformat(), ended_by=ended_by,
    )  # fmt: skip
    if isinstance(system, ReportsMetrics):
        try:
            record["invocations"][-1].update(system_metrics=system.metrics(), system_did_work=system_did_work)
        except Exception as err:  # a system that cannot count after a failure must not hide the failure
            log.warning("system metrics of this invocation not recorded (%s)", err)
    write_provenance(provenance.path, record)


def _finish(cfg: DictConfig, run_dir: Path, metrics: dict[str, Any], log_external: bool, table_on_disk: bool = False) -> None:
    table_path = run_dir / "table.md"
    table = None
    if table_on_disk and table_path.is_file() and table_path.stat().st_mtime >= (run_dir / "metrics.json").stat().st_mtime:
        markdown = table_path.read_text().rstrip("\n")
    else:
        benchmark_cls = get_class(RunMetrics.of(metrics).metadata.benchmark_target)
        table = benchmark_cls.make_table([metrics])
        markdown = to_markdown(table)
        table_path.write_text(markdown + "\n")
    print(markdown)
    if log_external:
        try:
            instantiate(cfg.logger).log_run(run_dir, semantic_config(cfg), metrics, table)
        except Exception as err:  # the files are the record; a logger failure must not lose the run
            log.warning("logger %s failed (%s); files are intact in %s", cfg.logger.get("_target_"), err, run_dir)
    print(f"view it: python -m scripts.view {run_dir}")
    print(run_dir / "metrics.json")
