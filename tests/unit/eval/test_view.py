"""scripts.view without a browser: bad input gives one line or a page saying what is missing, damaged lines are
named by file and line, viewing writes nothing into a run folder, and the embedded data cannot close its element."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from eval.view.page import embedded_json, html_page
from eval.view.read import read_run
from scripts.view import main as view_main
from tests.view_runs import XSS, ZEP_ODD_FACT, conflict_run, locomo_dataset, locomo_run, mosaic_store, zep_edges


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def test_a_folder_that_is_not_a_run_gives_one_line(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert view_main([str(tmp_path / "notes"), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not a run folder" in err and str(tmp_path / "notes") in err
    assert view_main([str(tmp_path / "absent"), "--out", str(tmp_path / "x.html")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_an_unfinished_run_gets_a_page_that_says_what_is_missing(tmp_path, capsys):
    run = locomo_run(tmp_path / "runs" / "locomo" / "rag" / "none" / "h1", n=5, finished=False)
    (run / "judgements.jsonl").unlink()
    data = read_run(run)
    assert not data["finished"] and any(m.startswith("metrics.json") for m in data["missing"])
    assert any(m.startswith("judgements.jsonl") for m in data["missing"])
    assert [i["state"] for i in data["tables"][0]["items"]] == ["unjudged"] * 5  # the answers so far, not judged
    assert view_main([str(run), "--out", str(tmp_path / "p.html")]) == 0
    assert "metrics.json (the run has not finished" in (tmp_path / "p.html").read_text()
    # a comparison needs finished runs: one line
    other = locomo_run(tmp_path / "runs" / "locomo" / "rag" / "none" / "h2", n=5)
    assert view_main([str(other), str(run), "--out", str(tmp_path / "c.html")]) == 2
    assert "has not finished" in capsys.readouterr().err


def test_a_malformed_json_line_is_named_by_file_and_line(tmp_path, capsys):
    run = locomo_run(tmp_path / "runs" / "locomo" / "rag" / "none" / "h1", n=4)
    lines = (run / "predictions.jsonl").read_text().splitlines()
    lines.insert(2, '{"key": "conv-t:q9", "broken')
    (run / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    data = read_run(run)
    assert len(data["tables"][0]["items"]) == 4
    assert len(data["damaged"]) == 1 and f"{run / 'predictions.jsonl'} line 3" in data["damaged"][0]
    assert view_main([str(run), "--out", str(tmp_path / "p.html")]) == 0
    assert f"{run / 'predictions.jsonl'} line 3" in capsys.readouterr().err
    (run / "metrics.json").write_text('{"benchmark": "locomo",\n  oops}')
    assert view_main([str(run), "--out", str(tmp_path / "p.html")]) == 2
    assert f"{run / 'metrics.json'}: line 2" in capsys.readouterr().err


def test_viewing_changes_nothing_in_the_run_folders(tmp_path):
    data = locomo_dataset(tmp_path / "locomo.json")
    a = locomo_run(tmp_path / "runs" / "locomo" / "rag" / "none" / "a", n=6, dataset=data)
    b = locomo_run(tmp_path / "runs" / "locomo" / "mosaic" / "none" / "b", n=6, seed=4, dataset=data)
    mosaic_store(b)
    c = conflict_run(tmp_path / "runs" / "conflict" / "mosaic" / "none" / "c", tmp_path / "suite.json")
    before = {p: _snapshot(p) for p in (a, b, c)}
    assert view_main([str(a), str(b), "--out", str(tmp_path / "out" / "c.html")]) == 0
    assert view_main([str(c), "--out", str(tmp_path / "out" / "d.html")]) == 0
    assert {p: _snapshot(p) for p in (a, b, c)} == before
    assert view_main([str(a), "--out", str(a / "view.html")]) == 2  # a page written into the run is refused
    assert _snapshot(a) == before[a]


def test_the_evidence_text_comes_from_the_dataset_and_its_absence_is_said(tmp_path):
    data = locomo_dataset(tmp_path / "locomo.json")
    run = locomo_run(tmp_path / "runs" / "locomo" / "rag" / "none" / "a", n=3, dataset=data)
    evidence = read_run(run)["tables"][0]["items"][0]["detail"][4]
    assert evidence["rows"] == [["D1:1", "Ann: made-up turn 1.1"]]
    data.unlink()
    page = read_run(run)
    assert any("is not on this machine" in note for note in page["notes"])


def test_embedded_data_cannot_close_its_script_element():
    text = embedded_json({"prediction": "</script><script>alert(1)</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and json.loads(text)["prediction"].startswith("</script>")
    page = html_page("a </title> title", {"mode": "run"}, [{"x": "</script>"}])
    assert page.count("</script>") == 3 and "a &lt;/title&gt; title" in page  # view-data, run-0 and the viewer's script
    assert "http://" not in page and "https://" not in page  # nothing fetched from a network


def test_serve_answers_on_localhost_only(tmp_path):
    import subprocess
    import sys
    import urllib.request

    run = locomo_run(tmp_path / "runs" / "locomo" / "rag" / "none" / "a", n=3)
    out = tmp_path / "page.html"
    server = subprocess.Popen([sys.executable, "-m", "scripts.view", str(run), "--out", str(out), "--serve", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])  # fmt: skip
    try:
        line = server.stdout.readline()
        assert line.startswith("serving on http://127.0.0.1:"), line + server.stderr.read()
        url = line.split()[2]
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.read().decode() == out.read_text()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_zep_edges_show_current_expired_and_ended_with_the_edge_that_expired_them(tmp_path):
    run = locomo_run(tmp_path / "runs" / "locomo" / "zep" / "none" / "z", n=3)
    path = zep_edges(run, damaged=True)
    data = read_run(run)
    assert len(data["damaged"]) == 1 and f"{path} line 2" in data["damaged"][0]  # the torn line, named
    (store,) = data["stores"]
    by_id = {row[0]: dict(zip(store["head"], row)) for row in store["rows"]}
    assert list(by_id) == ["z-old", "z-new", "z-job", "z-trip"] and store["status_col"] == store["head"].index("status")
    old, new, ended = by_id["z-old"], by_id["z-new"], by_id["z-job"]
    assert (old["status"], old["invalid at"], old["expired at"]) == ("expired", "2023-06-01T00:00:00+00:00", "2026-12-07T10:00:00+00:00")
    assert old["expired by (the edge that made graphiti expire it)"] == f"\u201c{ZEP_ODD_FACT + XSS}\u201d (z-new)"
    assert new["status"] == "current" and new["fact"] == ZEP_ODD_FACT + XSS  # text as written; the page escapes it
    assert new["expired (edges this one made graphiti expire)"] == "expired: \u201cAnn lives in Bergen\u201d (z-old)"
    assert (ended["status"], ended["expired by (the edge that made graphiti expire it)"]) == ("ended", "")
    assert (by_id["z-trip"]["status"], by_id["z-trip"]["expired by (the edge that made graphiti expire it)"]) == ("expired", "")
    assert view_main([str(run), "--out", str(tmp_path / "p.html")]) == 0
    page = (tmp_path / "p.html").read_text()
    assert XSS not in page and "Ann lives in Bergen" in page
