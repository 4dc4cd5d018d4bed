"""The scaling benchmark's small mode (the one CI runs) runs end to end and writes every key the issue asks for."""

from __future__ import annotations

import json

import pytest

from tests.script_loader import load_script


@pytest.mark.slow
def test_small_mode_writes_scaling_json_and_plots(tmp_path):
    module = load_script("bench_scaling")
    module.main(["--small", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "scaling.json").read_text())
    assert results["mode"] == "small" and results["data"]["ncs"] and results["data"]["retrieval"]
    assert [row["n_nodes"] for row in results["ncs"]] == module.SIZES["small"]["ncs"]
    for row in results["ncs"]:
        for key in ("n_nodes", "ncs_ms_per_update", "full_ms_per_update", "top10_agreement_vs_full"):
            assert key in row
        assert row["ncs_ms_per_update"] > 0 and row["full_ms_per_update"] > 0
        assert 0.0 <= row["top10_agreement_vs_full"] <= 1.0
        # push, refresh and community costs separately and amortised (issue 19 part 2)
        for key in ("refresh_ms", "refresh_interval_writes", "refresh_ms_amortised", "leiden_rerun_ms", "community_ms_amortised"):
            assert row[key] >= 0
        assert row["amortised_ms_per_update"] == pytest.approx(row["ncs_ms_per_update"] + row["refresh_ms_amortised"] + row["community_ms_amortised"])
        assert row["writes"] == module.SIZES["small"]["updates"] and len(row["agreement_checkpoints"]) == 4
    assert [row["n_items"] for row in results["retrieval"]] == module.SIZES["small"]["retrieval"]
    for row in results["retrieval"]:
        for key in ("n_items", "flat_ms", "hnsw_ms", "dual_ms", "dual_recall_at_5", "hnsw_recall_at_5", "llm_fallback_rate",
                    "memory_mb_flat", "memory_mb_hnsw", "memory_mb_dual"):
            assert key in row
        assert 0.0 <= row["dual_recall_at_5"] <= 1.0 and 0.0 <= row["llm_fallback_rate"] <= 1.0
    assert (tmp_path / "scaling_ncs.png").stat().st_size > 0
    assert (tmp_path / "scaling_retrieval.png").stat().st_size > 0


def test_skipped_section_is_carried_over_from_the_same_mode(tmp_path):
    module = load_script("bench_scaling")
    first = module.main(["--tiny", "--out", str(tmp_path), "--rounds", "3"])
    assert all(len(row["dual_ms_rounds"]) == 3 and row["dual_ms"] in row["dual_ms_rounds"] for row in first["retrieval"])
    second = module.main(["--tiny", "--out", str(tmp_path), "--skip-ncs", "--rounds", "1"])
    assert second["ncs"] == first["ncs"] and second["carried_over"]["ncs"] == first["command"]
    assert all(len(row["dual_ms_rounds"]) == 1 for row in second["retrieval"])
    other = module.main(["--small", "--out", str(tmp_path), "--skip-ncs", "--skip-retrieval"])
    assert other["ncs"] == [] and "carried_over" not in other  # a different mode's numbers are never mixed in
