"""Hydra entry point: `python run.py experiment=locomo system=mosaic llm=vllm ...`.

Composes the config, runs one table cell through eval.runner and returns the main metric
(so Hydra sweepers can optimise it). The last line printed is the path of metrics.json.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from core.api import HarnessError
from core.atomic import NO_SPACE, DiskFullError
from eval.runner import FAILURES_EXIT, Terminated, failure_line, run


def exit_now(code: int) -> NoReturn:
    """Leave at once after a stop signal, once the runner has closed the system and the LLM clients and recorded
    the usage: the interpreter's own teardown (garbage collection of the loaded libraries, joining threads whose
    calls were aborted) took most of a 10 s stop budget on a busy machine. An open W&B run is finished first."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish(exit_code=code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def disk_full_error(err: BaseException | None) -> OSError | None:
    """The earliest "no space left" error in ``err``'s chain (causes and errors during handling), if any: the
    write that first hit the full disk, not a later record that failed the same way. One that names its file
    (core.atomic's DiskFullError) is preferred to the bare OSError beneath it."""
    chain: list[BaseException] = []
    while err is not None and len(chain) < 20:
        chain.append(err)
        err = err.__cause__ or err.__context__
    full = [e for e in chain if isinstance(e, OSError) and e.errno in NO_SPACE]
    named = [e for e in full if isinstance(e, DiskFullError)]
    return (named or full or [None])[-1]


def harness_error(err: BaseException | None) -> HarnessError | None:
    """The HarnessError behind ``err`` (Hydra's instantiate wraps constructor errors), if any."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, HarnessError):
            return err
        err, seen = err.__cause__, seen + 1  # `raise ... from err` only: an error *during* handling is its own
    return None


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        metrics = run(cfg, overrides=list(HydraConfig.get().overrides.task))
    except Terminated as stop:  # SIGTERM: everything is recorded and closed by now
        exit_now(int(stop.code or 143))
    except KeyboardInterrupt:
        exit_now(130)
    except Exception as err:  # the harness's own faults: one line naming the file/URL/key and the fix
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        full = disk_full_error(err)
        known = full if isinstance(full, DiskFullError) else harness_error(err)
        if full is not None and known is not full:
            print(f"error (disk full): could not write {full.filename or 'a file'} ({full.strerror}): free space on that disk "
                  f"(results_dir={cfg.results_dir}, cache_dir={cfg.cache_dir}) and rerun the same command", file=sys.stderr)  # fmt: skip
            raise SystemExit(2) from None
        if known is None:
            raise
        print(f"error ({type(known).__name__}): {' '.join(str(known).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    failed = failure_line(metrics)
    if failed:  # a run with failed rows is not a clean result: say so, and in the exit status (not in a sweep)
        print(failed, file=sys.stderr)
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            raise SystemExit(FAILURES_EXIT)
    main_metric = metrics.get("main_metric")
    return float(main_metric) if isinstance(main_metric, int | float) else None


if __name__ == "__main__":
    main()
