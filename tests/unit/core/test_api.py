"""Capabilities at the seams: every optional thing the eval layer reads from a system is a Protocol in
core/api.py, checked with ``isinstance``, never looked up by name; eval/ builds on core/, not on MOSAIC.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

import core.api as api
from eval.workers import SystemGuard
from tests.conftest import REPO

# what eval/ reads from a system beyond MemorySystem, and the Protocol in core/api.py that declares each
CAPABILITIES = {
    "run_metadata": api.ReportsRunMetadata,
    "metrics": api.ReportsMetrics,
    "parallel_namespaces": api.ParallelNamespaces,
    "parallel_search": api.ParallelSearch,
    "conflict_signal": api.DeclaresConflictSignal,
}
BY_NAME = re.compile(r"""\b(?:hasattr|getattr)\(\s*[\w.]+\s*,\s*["'](%s)["']""" % "|".join(CAPABILITIES))


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_each_capability_is_a_runtime_checkable_protocol_in_core_api(name):
    protocol = CAPABILITIES[name]
    assert protocol.__module__ == "core.api" and getattr(protocol, "_is_protocol", False) and getattr(protocol, "_is_runtime_protocol", False)
    assert name in typing.get_type_hints(protocol) or callable(getattr(protocol, name, None))
    assert protocol.__doc__, f"{protocol.__name__}: say what the capability promises and who reads it"


def test_eval_never_reads_a_capability_by_name():
    found = [f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for path in sorted((REPO / "eval").rglob("*.py")) for text in [path.read_text(encoding="utf-8")]
             for m in BY_NAME.finditer(text)]  # fmt: skip
    assert not found, "read these through the Protocols in core/api.py with isinstance: " + "; ".join(found)


def test_capabilities_are_what_isinstance_and_the_guard_see():
    class Plain:
        name = "plain"

    class Declared:
        name = "declared"
        parallel_namespaces = True
        parallel_search = True
        conflict_signal = False

        def run_metadata(self) -> dict:
            return {}

        def metrics(self) -> dict:
            return {}

    assert not any(isinstance(Plain(), protocol) for protocol in CAPABILITIES.values())
    assert all(isinstance(Declared(), protocol) for protocol in CAPABILITIES.values())
    guard = SystemGuard(Declared())
    assert guard.parallel_namespaces and guard.parallel_search and not SystemGuard(Plain()).parallel_namespaces


def test_benchmark_protocols_live_in_core_api():
    import eval.context
    from eval.benchmarks.conflict import ConflictBenchmark
    from eval.benchmarks.halumem import HaluMemBenchmark
    from eval.benchmarks.locomo import LoCoMoBenchmark

    assert api.Benchmark.__module__ == "core.api" and api.InputChecked.__module__ == "core.api"
    assert "class Benchmark" not in Path(eval.context.__file__).read_text(encoding="utf-8")
    for cls in (LoCoMoBenchmark, ConflictBenchmark, HaluMemBenchmark):
        assert callable(cls.run) and callable(cls.make_table), cls


def test_eval_and_core_import_nothing_from_mosaic():
    """The conflict benchmark's miss analysis parses numbers with core.quantities, the same parser for every system."""
    imports = re.compile(r"^\s*(?:from|import)\s+mosaic\b", re.MULTILINE)
    found = [str(path.relative_to(REPO)) for layer in ("eval", "core") for path in sorted((REPO / layer).rglob("*.py"))
             if imports.search(path.read_text(encoding="utf-8"))]  # fmt: skip
    assert not found
    assert (REPO / "core" / "quantities.py").is_file() and not (REPO / "mosaic" / "values.py").exists()



# what eval/'s shared modules ask of a benchmark's or system's class, and the classes that declare each today
CLASS_CAPABILITIES = {
    api.ChecksOwnConfig: ["eval.benchmarks.locomo.LoCoMoBenchmark"],
    api.ReadsOracleFacts: ["baselines.rag.RagMemory", "mosaic.extract.EntityExtractor"],
    api.DeclaresRanking: ["baselines.full_context.FullContextMemory"],
    api.LabelsRows: ["baselines.memgpt.MemGPTMemory"],
    api.SummarisesMechanisms: ["mosaic.memory.MosaicMemory"],
    api.PublishesOwnCopy: ["eval.benchmarks.halumem.HaluMemBenchmark"],
    api.HasExtraTables: ["eval.benchmarks.locomo.LoCoMoBenchmark", "eval.benchmarks.conflict.ConflictBenchmark"],
    api.DrawsFigures: ["eval.benchmarks.locomo.LoCoMoBenchmark"],
    api.UpgradesRecords: ["eval.benchmarks.locomo.LoCoMoBenchmark"],
    api.DeclaresInputs: ["eval.benchmarks.locomo.LoCoMoBenchmark", "eval.benchmarks.halumem.HaluMemBenchmark",
                         "eval.benchmarks.conflict.ConflictBenchmark", "baselines.memgpt.MemGPTMemory"],
}  # fmt: skip


@pytest.mark.parametrize("protocol", list(CLASS_CAPABILITIES), ids=lambda p: p.__name__)
def test_each_class_capability_is_declared_on_the_classes_that_have_it_and_not_on_a_plain_class(protocol):
    from hydra.utils import get_class

    assert protocol.__module__ == "core.api" and getattr(protocol, "_is_runtime_protocol", False) and protocol.__doc__
    assert all(isinstance(get_class(target), protocol) for target in CLASS_CAPABILITIES[protocol])
    assert not isinstance(type("Plain", (), {}), protocol)


def test_eval_never_looks_a_class_hook_up_by_name():
    hooks = ("config_problems", "oracle_source_parameter", "ranks_search", "row_label", "mechanism_row", "publish_copy",
             "make_extra_tables", "make_figures", "upgrade_record", "input_parameters")
    by_name = re.compile(r"""\b(?:hasattr|getattr)\(\s*[\w.]+\s*,\s*["'](%s)["']""" % "|".join(hooks))
    found = [f"{path.relative_to(REPO)}: {m.group(0)}" for layer in ("eval", "scripts") for path in sorted((REPO / layer).rglob("*.py"))
             for m in by_name.finditer(path.read_text(encoding="utf-8"))]  # fmt: skip
    assert not found, "read these through core.api's Protocols with isinstance: " + "; ".join(found)
