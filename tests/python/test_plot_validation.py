"""scripts/plot_validation.py: draws `tiergym validate --json` output, refuses bad input."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "plot_validation.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def validation(models=("paper", "concurrent")):
    runs = []
    for i, name in enumerate(["hbm10", "hbm50", "range-a"]):
        measured = 10e9 + i * 1e9
        entry = {"name": name, "measured_ns": measured, "estimated_ns": measured * 1.05,
                 "error_pct": 5.0, "models": {}}
        for m in models:
            entry["models"][m] = {"estimated_ns": measured * 1.02, "error_pct": 2.0}
        runs.append(entry)
    return {"runs": runs, "mean_error_pct": 5.0, "max_error_pct": 5.0, "model": "paper"}


def test_draws_every_model(tmp_path):
    pytest.importorskip("matplotlib")
    src = tmp_path / "v.json"
    src.write_text(json.dumps(validation()))
    out = tmp_path / "v.png"
    r = run(str(src), "--out", str(out), "--title", "toy")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_names_the_missing_key(tmp_path):
    doc = validation()
    del doc["runs"][1]["measured_ns"]
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(doc))
    r = run(str(src), "--out", str(tmp_path / "x.png"))
    assert r.returncode == 1
    assert "runs[1] has no 'measured_ns'" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_refuses_a_document_without_runs(tmp_path):
    src = tmp_path / "empty.json"
    src.write_text("{}")
    r = run(str(src), "--out", str(tmp_path / "x.png"))
    assert r.returncode == 1
    assert "'runs' must be a list" in r.stderr
